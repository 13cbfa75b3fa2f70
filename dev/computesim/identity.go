package computesim

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The instance identity tokens of the simulated VMs
// (https://cloud.google.com/compute/docs/instances/verifying-instance-identity):
// GET instance/service-accounts/default/identity?audience=AUD[&format=full]
// answers an RS256 JWT with Google's claims (iss https://accounts.google.com,
// aud, azp and sub the service account's id, iat, exp one hour later, and
// with format=full google.compute_engine{project_id, project_number, zone,
// instance_id, instance_name, instance_creation_timestamp}), signed with a
// key the simulator generates on first use; CertsPath on the simulator's
// Compute endpoint serves the matching JWKS in the shape of
// https://www.googleapis.com/oauth2/v3/certs. iat and exp are on the wall
// clock: the verifier (google.golang.org/api/idtoken) checks exp against
// time.Now, whatever clock the simulation runs on.

// CertsPath is where the simulator's Compute endpoint serves its JWKS.
const CertsPath = "/oauth2/v3/certs"

// identityLifetime is an identity token's life ("expires within an hour").
const identityLifetime = time.Hour

// Issuer signs identity tokens. The zero value is not usable; NewIssuer.
type Issuer struct {
	key *rsa.PrivateKey
	kid string
	now func() time.Time
}

// NewIssuer generates a key.
func NewIssuer() (*Issuer, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating the identity token key: %w", err)
	}
	sum := sha256.Sum256(k.N.Bytes())
	return &Issuer{key: k, kid: "sim-" + hex.EncodeToString(sum[:8]), now: time.Now}, nil
}

// KeyID is the key's kid.
func (i *Issuer) KeyID() string { return i.kid }

// JWKS is the key set, as Google's certs endpoint answers it.
func (i *Issuer) JWKS() []byte {
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": i.kid,
		"n": base64.RawURLEncoding.EncodeToString(i.key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(i.key.E)).Bytes()),
	}}})
	return b
}

// ServeHTTP serves the JWKS.
func (i *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(i.JWKS())
}

// Sign signs claims as an RS256 JWT with the issuer's key.
func (i *Issuer) Sign(claims map[string]any) (string, error) {
	h, err := json.Marshal(map[string]string{"alg": "RS256", "kid": i.kid, "typ": "JWT"})
	if err != nil {
		return "", err
	}
	p, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signed := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, i.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// IdentityVM is what a VM's identity token says of it.
type IdentityVM struct {
	Project, ProjectNumber, Zone, Name string
	ID                                 uint64
	Created                            time.Time
	Email                              string // the service account
}

// Token returns the identity token of vm for audience; full adds
// google.compute_engine.
func (i *Issuer) Token(vm IdentityVM, audience string, full bool) (string, error) {
	now := i.now()
	sub := subjectOf(vm.Email)
	claims := map[string]any{
		"iss": "https://accounts.google.com", "aud": audience, "azp": sub, "sub": sub,
		"iat": now.Unix(), "exp": now.Add(identityLifetime).Unix(),
	}
	if full {
		claims["email"], claims["email_verified"] = vm.Email, true
		claims["google"] = map[string]any{"compute_engine": map[string]any{
			"project_id": vm.Project, "project_number": vm.ProjectNumber, "zone": vm.Zone,
			"instance_id": strconv.FormatUint(vm.ID, 10), "instance_name": vm.Name,
			"instance_creation_timestamp": vm.Created.Unix(),
		}}
	}
	return i.Sign(claims)
}

// subjectOf is a stable numeric id for a service account (Google's sub is
// the account's unique id).
func subjectOf(email string) string {
	sum := sha256.Sum256([]byte(email))
	n := new(big.Int).SetBytes(sum[:9])
	return "1" + fmt.Sprintf("%020s", n.String())[:20]
}

// identityIssuer is the simulator's issuer, made on first use (a key takes
// tens of milliseconds to generate; most simulations never ask).
type identityIssuer struct {
	once sync.Once
	iss  *Issuer
	err  error
}

// Issuer returns the simulator's identity token issuer.
func (s *Sim) Issuer() (*Issuer, error) {
	s.identity.once.Do(func() { s.identity.iss, s.identity.err = NewIssuer() })
	return s.identity.iss, s.identity.err
}

// serveCerts serves the JWKS at CertsPath.
func (s *Sim) serveCerts(w http.ResponseWriter, r *http.Request) {
	iss, err := s.Issuer()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	iss.ServeHTTP(w, r)
}

// serveIdentity answers instance/service-accounts/default/identity: 400
// without an audience, as Compute Engine's server does.
func (s *Sim) serveIdentity(w http.ResponseWriter, r *http.Request, v vmView) {
	aud := r.URL.Query().Get("audience")
	if aud == "" {
		metaText(w, http.StatusBadRequest, "non-empty audience parameter required\n")
		return
	}
	iss, err := s.Issuer()
	if err != nil {
		metaText(w, http.StatusInternalServerError, err.Error()+"\n")
		return
	}
	tok, err := iss.Token(IdentityVM{Project: v.project, ProjectNumber: v.projectNumber, Zone: v.zone, Name: v.name,
		ID: v.id, Created: v.created, Email: v.email}, aud, r.URL.Query().Get("format") == "full")
	if err != nil {
		metaText(w, http.StatusInternalServerError, err.Error()+"\n")
		return
	}
	metaText(w, http.StatusOK, tok)
}

// StaticVM is a VM outside the simulation that has a metadata server of
// its own: the local system's Slurm controller, which proves its reports
// with identity tokens as a real controller VM does.
type StaticVM struct {
	Zone, Name string
	ID         uint64
	Email      string // its service account; "" is the project's default compute account
}

// StartStaticMetadataServer serves the metadata server of vm on addr (as
// StartMetadataServer does for a simulated VM): its name, zone, project,
// service account, access and identity tokens.
func (s *Sim) StartStaticMetadataServer(vm StaticVM, addr string, tokens *Tokens) (*MetadataServer, error) {
	if tokens == nil {
		tokens = NewTokens()
	}
	email := vm.Email
	if email == "" {
		email = s.opts.ProjectNumber + "-compute@developer.gserviceaccount.com"
	}
	created := time.Now()
	view := func() (vmView, bool) {
		return vmView{project: s.opts.Project, projectNumber: s.opts.ProjectNumber, zone: vm.Zone, name: vm.Name,
			id: vm.ID, machineType: "n2-standard-4", ip: "127.0.0.1", attrs: map[string]string{},
			email: email, scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}, created: created}, true
	}
	return s.startMetadata(vm.Zone, vm.Name, addr, s.metadataHandler(view, tokens))
}
