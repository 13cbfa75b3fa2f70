package hooks

import (
	"context"
	"encoding/json"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/identity"
)

// Signer adds the sending VM's identity token to a message's attributes
// (identity.Signer).
type Signer interface {
	Sign(ctx context.Context, cluster string, data []byte, attrs map[string]string) (map[string]string, error)
}

// SigningPublisher publishes every message with the VM's instance identity
// token for it, fetched at publish time (never spooled: a spooled message
// may outlive the token's hour), so that the functions can tell which VM
// sent it (docs/security.md, "Reports prove which VM sent them"). A
// message whose token cannot be had is not published: it stays spooled
// for a later flush.
type SigningPublisher struct {
	Pub    Publisher
	Signer Signer
}

// Publish signs and publishes.
func (p SigningPublisher) Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error) {
	// What is not a report goes unsigned: the functions ask no proof of
	// it (or refuse it as malformed), and holding it back would leave it
	// in the spool for ever.
	hdr, err := event.PeekHeader(data)
	if err != nil || !Proven(hdr.Type) {
		return p.Pub.Publish(ctx, topic, data, attrs)
	}
	signed, err := p.Signer.Sign(ctx, hdr.Cluster, data, attrs)
	if err != nil {
		return "", err
	}
	return p.Pub.Publish(ctx, topic, data, signed)
}

// NewSigningPublisher signs with the metadata server at host (host:port;
// "" is GCE_METADATA_HOST's or Compute Engine's).
func NewSigningPublisher(pub Publisher, host string) SigningPublisher {
	return SigningPublisher{Pub: pub, Signer: identity.Signer{Host: host}}
}

// Proven reports whether the functions accept an event of type typ only
// with its sender's identity token: the reports of the controller's and the
// nodes' hooks and of a node's bootstrap.
func Proven(typ string) bool {
	switch typ {
	case event.TypeJobPending, event.TypeJobStarted, event.TypeJobFinished, event.TypeJobCancelled,
		event.TypeNodeSuspend, event.TypeResumeFailed, event.TypeHealthFailure, event.TypeBootstrapFail, event.TypeVersionMismatch:
		return true
	}
	return false
}

// NodeSigner signs a report at the metadata server of the node it is
// about (NodeMetadataHost of its "node" member), and any other at
// Config.MetadataHost. On a VM no per-node record exists and both are the
// VM's own; the local system's simulated VMs share one root and one spool,
// so a report one node spooled is signed as that node's VM whichever
// node's hook flushes it.
type NodeSigner struct{ Config Config }

// Sign signs data with the token of the metadata server NodeSigner picks.
func (s NodeSigner) Sign(ctx context.Context, cluster string, data []byte, attrs map[string]string) (map[string]string, error) {
	host := s.Config.MetadataHost
	var about struct {
		Node string `json:"node"`
	}
	if json.Unmarshal(data, &about) == nil && about.Node != "" {
		host = NodeMetadataHost(s.Config, about.Node)
	}
	return identity.Signer{Host: host}.Sign(ctx, cluster, data, attrs)
}
