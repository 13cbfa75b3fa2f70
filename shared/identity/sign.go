package identity

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"cloud.google.com/go/compute/metadata"
)

// Signer fetches its VM's instance identity token for a message, as
// Google's idtoken does on Compute Engine (computeIDTokenSource: GET
// instance/service-accounts/default/identity?audience=AUD&format=full).
// The metadata server is GCE_METADATA_HOST's, or Compute Engine's.
type Signer struct {
	// Client is the metadata client; nil is a client of Host.
	Client *metadata.Client
	// Host, when set (host:port), is the metadata server asked instead of
	// GCE_METADATA_HOST's or Compute Engine's (the local system's
	// simulated VMs and controller).
	Host string
}

// hostRewrite sends every request to host.
type hostRewrite struct {
	host string
	next http.RoundTripper
}

func (h hostRewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = h.host, h.host
	return h.next.RoundTrip(r)
}

// Token returns the VM's token for (cluster, data).
func (s Signer) Token(ctx context.Context, cluster string, data []byte) (string, error) {
	c := s.Client
	if c == nil && s.Host != "" {
		c = metadata.NewClient(&http.Client{Transport: hostRewrite{host: s.Host, next: http.DefaultTransport}})
	}
	if c == nil {
		c = metadata.NewClient(nil)
	}
	v := url.Values{}
	v.Set("audience", Audience(cluster, data))
	v.Set("format", "full")
	tok, err := c.GetWithContext(ctx, "instance/service-accounts/default/identity?"+v.Encode())
	if err != nil {
		return "", fmt.Errorf("fetching the VM's identity token from the metadata server: %w", err)
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", fmt.Errorf("the metadata server answered an empty identity token")
	}
	return tok, nil
}

// Sign returns attrs with the VM's token for (cluster, data) added (a new
// map; attrs is not changed).
func (s Signer) Sign(ctx context.Context, cluster string, data []byte, attrs map[string]string) (map[string]string, error) {
	tok, err := s.Token(ctx, cluster, data)
	if err != nil {
		return nil, err
	}
	chunks, err := Attributes(tok)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(attrs)+len(chunks))
	for k, v := range attrs {
		if !strings.HasPrefix(k, AttrPrefix) {
			out[k] = v
		}
	}
	maps.Copy(out, chunks)
	return out, nil
}
