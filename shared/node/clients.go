package node

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strings"

	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"
	secretmanager "google.golang.org/api/secretmanager/v1"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/identity"
	"github.com/flexslurm/flexslurm/shared/pubsub"
)

// SecretManager reads secret versions with the Secret Manager REST client
// (google.golang.org/api/secretmanager/v1) and the VM's service account's
// token from the metadata server.
type SecretManager struct {
	svc *secretmanager.Service
}

// NewSecretManager returns a client of endpoint ("" for
// https://secretmanager.googleapis.com/).
func NewSecretManager(ctx context.Context, endpoint string) (*SecretManager, error) {
	opts := []option.ClientOption{option.WithTokenSource(google.ComputeTokenSource("", "https://www.googleapis.com/auth/cloud-platform"))}
	if endpoint != "" {
		if !strings.HasSuffix(endpoint, "/") {
			endpoint += "/"
		}
		opts = append(opts, option.WithEndpoint(endpoint))
	}
	svc, err := secretmanager.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("secret manager client: %w", err)
	}
	return &SecretManager{svc: svc}, nil
}

// Access implements Secrets, checking the payload's CRC32C when the API
// sends one.
func (m *SecretManager) Access(ctx context.Context, version string) ([]byte, error) {
	r, err := m.svc.Projects.Secrets.Versions.Access(version).Context(ctx).Do()
	if err != nil {
		return nil, err
	}
	if r.Payload == nil {
		return nil, fmt.Errorf("secret version %s: no payload", version)
	}
	data, err := base64.StdEncoding.DecodeString(r.Payload.Data)
	if err != nil {
		return nil, fmt.Errorf("secret version %s: payload: %w", version, err)
	}
	if r.Payload.DataCrc32c != 0 && int64(crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))) != r.Payload.DataCrc32c {
		return nil, fmt.Errorf("secret version %s: payload does not match its CRC32C", version)
	}
	return data, nil
}

// PubSubReporter publishes node.bootstrap_failed and node.version_mismatch with the Pub/Sub client
// (the emulator when PUBSUB_EMULATOR_HOST is set; otherwise the VM's
// service account, through the metadata server), carrying the VM's
// identity token (identity.Signer: GCE_METADATA_HOST's metadata server, or
// Compute Engine's), without which the function refuses it.
type PubSubReporter struct{}

// BootstrapFailed implements Reporter.
func (PubSubReporter) BootstrapFailed(ctx context.Context, project, topic string, ev event.Bootstrap) error {
	return publishSigned(ctx, project, topic, ev.Header, ev)
}

// VersionMismatch implements VersionReporter.
func (PubSubReporter) VersionMismatch(ctx context.Context, project, topic string, ev event.VersionMismatch) error {
	return publishSigned(ctx, project, topic, ev.Header, ev)
}

// publishSigned publishes payload v (of header ev) with the VM's identity
// token.
func publishSigned(ctx context.Context, project, topic string, ev event.Header, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	attrs, err := identity.Signer{}.Sign(ctx, ev.Cluster, data, map[string]string{"type": ev.Type, "cluster": ev.Cluster})
	if err != nil {
		return fmt.Errorf("%s: %w", ev.Type, err)
	}
	c, err := pubsub.New(ctx, project)
	if err != nil {
		return fmt.Errorf("pubsub client: %w", err)
	}
	defer c.Close()
	if _, err := c.Publish(ctx, topic, data, attrs); err != nil {
		return fmt.Errorf("publishing %s to %s: %w", ev.Type, topic, err)
	}
	return nil
}
