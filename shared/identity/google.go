package identity

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/api/idtoken"
	"google.golang.org/api/option"
)

// GoogleCertsURL is where idtoken fetches the keys of Google-signed RS256
// tokens (idtoken's googleSACertsURL; the JWKS of
// https://www.googleapis.com/oauth2/v3/certs).
const GoogleCertsURL = "https://www.googleapis.com/oauth2/v3/certs"

// Issuers are the iss values of Google-signed instance identity tokens
// ("https://accounts.google.com"; "accounts.google.com" is the older
// spelling Google's OpenID discovery also accepts).
var Issuers = []string{"https://accounts.google.com", "accounts.google.com"}

// Google verifies tokens with google.golang.org/api/idtoken.
type Google struct {
	v *idtoken.Validator
}

// NewGoogle returns a verifier using Google's certificates. certsURL, when
// not empty, is fetched instead of GoogleCertsURL (and only that URL is
// rewritten): the local system's Compute simulator serves its own keys
// there. Only the operator sets it (the functions' environment); see
// docs/security.md.
func NewGoogle(ctx context.Context, certsURL string) (*Google, error) {
	var rt http.RoundTripper = http.DefaultTransport
	if certsURL != "" {
		u, err := url.Parse(certsURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("identity certificates URL %q is not an http(s) URL", certsURL)
		}
		rt = certsRewrite{to: u, next: rt}
	}
	v, err := idtoken.NewValidator(ctx, option.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		return nil, fmt.Errorf("creating the identity token validator: %w", err)
	}
	return &Google{v: v}, nil
}

// certsRewrite sends a request for GoogleCertsURL to another URL; every
// other request goes where it was addressed.
type certsRewrite struct {
	to   *url.URL
	next http.RoundTripper
}

func (c certsRewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.String() != GoogleCertsURL {
		return c.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.URL = c.to
	r.Host = c.to.Host
	return c.next.RoundTrip(r)
}

// Verify implements Verifier.
func (g *Google) Verify(ctx context.Context, cluster string, data []byte, attrs map[string]string, want Want) (Claims, error) {
	tok, err := Token(attrs)
	if err != nil {
		return Claims{}, err
	}
	aud := Audience(cluster, data)
	p, err := g.v.Validate(ctx, tok, aud)
	if err != nil {
		if unavailable(err) {
			return Claims{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if pp, perr := idtoken.ParsePayload(tok); perr == nil && pp.Audience != aud {
			return Claims{}, refused("token audience does not match this cluster and payload (the payload was changed, or the token was made for another message): %v", err)
		}
		return Claims{}, refused("token does not verify: %v", err)
	}
	ok := false
	for _, iss := range Issuers {
		ok = ok || p.Issuer == iss
	}
	if !ok {
		return Claims{}, refused("token issuer %q is not Google's", p.Issuer)
	}
	c, err := claimsOf(p.Claims)
	if err != nil {
		return Claims{}, err
	}
	return c, want.Match(c)
}

// claimsOf reads google.compute_engine of a full-format token.
func claimsOf(m map[string]any) (Claims, error) {
	g, ok := m["google"].(map[string]any)
	if !ok {
		return Claims{}, refused("token has no google claim: not a VM's full-format instance identity token")
	}
	ce, ok := g["compute_engine"].(map[string]any)
	if !ok {
		return Claims{}, refused("token has no google.compute_engine claim: not a VM's full-format instance identity token")
	}
	str := func(k string) string {
		switch v := ce[k].(type) {
		case string:
			return v
		case float64:
			return fmt.Sprintf("%.0f", v)
		}
		return ""
	}
	c := Claims{Project: str("project_id"), ProjectNumber: str("project_number"), Zone: str("zone"),
		Instance: str("instance_name"), InstanceID: str("instance_id")}
	if c.Project == "" || c.Zone == "" || c.Instance == "" {
		return Claims{}, refused("token's google.compute_engine lacks project_id, zone or instance_name")
	}
	return c, nil
}

// unavailable tells a failure to fetch the certificates (retried) from a
// token that does not verify (refused).
func unavailable(err error) bool {
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	return strings.Contains(err.Error(), "unable to retrieve cert")
}
