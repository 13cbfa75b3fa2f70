package hooks

import (
	"context"

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
		event.TypeNodeSuspend, event.TypeResumeFailed, event.TypeHealthFailure, event.TypeBootstrapFail:
		return true
	}
	return false
}
