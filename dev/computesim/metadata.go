package computesim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The metadata server of a simulated VM, in the wire format of Compute
// Engine's (https://cloud.google.com/compute/docs/metadata/querying-metadata,
// https://cloud.google.com/compute/docs/metadata/predefined-metadata-keys,
// and the client cloud.google.com/go/compute/metadata, which sends
// GET http://$GCE_METADATA_HOST/computeMetadata/v1/SUFFIX with
// "Metadata-Flavor: Google" and maps 404 to NotDefinedError):
//
//   - every request must carry "Metadata-Flavor: Google" and no
//     X-Forwarded-For header, else 403; every response carries
//     "Metadata-Flavor: Google";
//   - instance/{name,id,zone,hostname,machine-type} — zone and machine-type
//     as projects/NUMBER/zones/ZONE[/machineTypes/TYPE];
//   - instance/attributes/ (keys, one a line; ?recursive=true: a JSON
//     object) and instance/attributes/KEY (404 when absent), from the VM's
//     metadata items (its template's, plus created-by);
//   - instance/network-interfaces/0/ip;
//   - instance/service-accounts/ and
//     instance/service-accounts/{default,EMAIL}/{email,scopes,token,identity}, for the
//     VM's service account (404 without one: no token on such a VM);
//     identity?audience=AUD[&format=full] is the VM's Google-style instance
//     identity token (identity.go);
//   - project/project-id and project/numeric-project-id.
//
// Anything else is 404. Tokens are random strings valid for an hour,
// recorded in a Tokens registry so that an API stand-in (SecretManager) can
// accept exactly the tokens its VMs obtained.

// MetadataFlavor is the header (and value) a metadata request and response
// carry.
const (
	MetadataFlavorHeader = "Metadata-Flavor"
	MetadataFlavor       = "Google"
)

// tokenLifetime is how long a minted access token is valid (the metadata
// server answers expires_in of at most 3599 s).
const tokenLifetime = time.Hour

// Tokens records the access tokens metadata servers handed out. The zero
// value is not usable; call NewTokens.
type Tokens struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]tokenRec
}

type tokenRec struct {
	email   string
	expires time.Time
}

// NewTokens returns an empty registry on the wall clock: tokens are
// checked by API stand-ins that run in real time.
func NewTokens() *Tokens { return &Tokens{now: time.Now, m: map[string]tokenRec{}} }

func (t *Tokens) mint(email string) (string, time.Duration) {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := "ya29.sim-" + hex.EncodeToString(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for k, r := range t.m {
		if now.After(r.expires) {
			delete(t.m, k)
		}
	}
	t.m[tok] = tokenRec{email: email, expires: now.Add(tokenLifetime)}
	return tok, tokenLifetime - time.Second
}

// Valid returns the service account a token was issued for, and whether it
// is a token a metadata server issued that has not expired.
func (t *Tokens) Valid(tok string) (email string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.m[tok]
	if !ok || t.now().After(r.expires) {
		return "", false
	}
	return r.email, true
}

// MetadataServer is one VM's metadata server on its own listener.
type MetadataServer struct {
	zone, name string
	ln         net.Listener
	srv        *http.Server
	done       chan struct{}
}

// StartMetadataServer serves the metadata server of VM name in zone on
// addr ("127.0.0.1:0" for a free port) until Close. The VM's process
// reaches it through GCE_METADATA_HOST=Addr(). tokens records the access
// tokens it hands out (nil: a registry of its own). Every answer reflects
// the VM as it is at request time; once the VM is gone, every path is 404.
func (s *Sim) StartMetadataServer(zone, name, addr string, tokens *Tokens) (*MetadataServer, error) {
	if tokens == nil {
		tokens = NewTokens()
	}
	return s.startMetadata(zone, name, addr, s.MetadataHandler(zone, name, tokens))
}

func (s *Sim) startMetadata(zone, name, addr string, h http.Handler) (*MetadataServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metadata server of VM %s: listening on %s: %w", name, addr, err)
	}
	m := &MetadataServer{zone: zone, name: name, ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Error("computesim: metadata server", "vm", name, "addr", ln.Addr().String(), "err", err)
		}
	}()
	return m, nil
}

// Addr is the server's host:port, the value of GCE_METADATA_HOST.
func (m *MetadataServer) Addr() string { return m.ln.Addr().String() }

// Close stops the server at once.
func (m *MetadataServer) Close() error {
	err := m.srv.Close()
	<-m.done
	return err
}

// vmView is what a metadata server answers from, copied under the lock.
type vmView struct {
	project, projectNumber, zone, name string
	id                                 uint64
	machineType                        string
	ip                                 string
	attrs                              map[string]string
	attrKeys                           []string // in metadata order
	email                              string
	scopes                             []string
	created                            time.Time
}

func (s *Sim) vmView(zone, name string) (vmView, bool) {
	s.lockForWrite()
	defer s.mu.Unlock()
	s.advanceLocked(s.nowLocked())
	in := s.findInstanceLocked(zone, name)
	if in == nil {
		return vmView{}, false
	}
	v := vmView{project: in.project, projectNumber: s.opts.ProjectNumber, zone: zone, name: name,
		id: in.pb.GetId(), machineType: lastSegment(in.pb.GetMachineType()), attrs: map[string]string{}}
	if nics := in.pb.GetNetworkInterfaces(); len(nics) > 0 {
		v.ip = nics[0].GetNetworkIP()
	}
	for _, it := range in.pb.GetMetadata().GetItems() {
		if _, dup := v.attrs[it.GetKey()]; !dup {
			v.attrKeys = append(v.attrKeys, it.GetKey())
		}
		v.attrs[it.GetKey()] = it.GetValue()
	}
	if sas := in.pb.GetServiceAccounts(); len(sas) > 0 {
		v.email = sas[0].GetEmail()
		if v.email == "default" || v.email == "" {
			v.email = s.opts.ProjectNumber + "-compute@developer.gserviceaccount.com"
		}
		v.scopes = slices.Clone(sas[0].GetScopes())
	}
	v.created, _ = time.Parse(time.RFC3339Nano, in.pb.GetCreationTimestamp())
	return v, true
}

// MetadataHandler is the metadata server of VM name in zone as an
// http.Handler (StartMetadataServer serves it on a listener).
func (s *Sim) MetadataHandler(zone, name string, tokens *Tokens) http.Handler {
	return s.metadataHandler(func() (vmView, bool) { return s.vmView(zone, name) }, tokens)
}

// metadataHandler serves the metadata of the VM view returns.
func (s *Sim) metadataHandler(view func() (vmView, bool), tokens *Tokens) http.Handler {
	if tokens == nil {
		tokens = NewTokens()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(MetadataFlavorHeader, MetadataFlavor)
		w.Header().Set("Server", "Metadata Server for VM")
		if r.Header.Get(MetadataFlavorHeader) != MetadataFlavor || r.Header.Get("X-Forwarded-For") != "" {
			// The real server answers 403 to a request without the header
			// (or with X-Forwarded-For), so that a request forwarded by a
			// proxy on the VM cannot read it.
			metaText(w, http.StatusForbidden, "Missing required header \"Metadata-Flavor\": \"Google\"\n")
			return
		}
		if r.Method != http.MethodGet {
			metaText(w, http.StatusMethodNotAllowed, "method not allowed\n")
			return
		}
		suffix, ok := strings.CutPrefix(r.URL.Path, "/computeMetadata/v1/")
		if !ok {
			metaText(w, http.StatusNotFound, "not found\n")
			return
		}
		v, ok := view()
		if !ok {
			metaText(w, http.StatusNotFound, "not found\n")
			return
		}
		recursive := r.URL.Query().Get("recursive") == "true"
		switch suffix {
		case "instance/name":
			metaText(w, 200, v.name)
		case "instance/id":
			metaText(w, 200, strconv.FormatUint(v.id, 10))
		case "instance/zone":
			metaText(w, 200, "projects/"+v.projectNumber+"/zones/"+v.zone)
		case "instance/hostname":
			metaText(w, 200, v.name+"."+v.zone+".c."+v.project+".internal")
		case "instance/machine-type":
			metaText(w, 200, "projects/"+v.projectNumber+"/machineTypes/"+v.machineType)
		case "instance/network-interfaces/0/ip":
			metaText(w, 200, v.ip)
		case "project/project-id":
			metaText(w, 200, v.project)
		case "project/numeric-project-id":
			metaText(w, 200, v.projectNumber)
		case "instance/attributes/":
			if recursive {
				metaJSON(w, v.attrs)
				return
			}
			var b strings.Builder
			for _, k := range v.attrKeys {
				b.WriteString(k + "\n")
			}
			metaText(w, 200, b.String())
		case "instance/service-accounts/":
			if v.email == "" {
				metaText(w, 200, "")
				return
			}
			metaText(w, 200, "default/\n"+v.email+"/\n")
		default:
			if key, ok := strings.CutPrefix(suffix, "instance/attributes/"); ok && key != "" && !strings.Contains(key, "/") {
				val, ok := v.attrs[key]
				if !ok {
					metaText(w, http.StatusNotFound, "not found\n")
					return
				}
				metaText(w, 200, val)
				return
			}
			if rest, ok := strings.CutPrefix(suffix, "instance/service-accounts/"); ok && v.email != "" {
				acct, item, _ := strings.Cut(rest, "/")
				if acct != "default" && acct != v.email {
					break
				}
				switch item {
				case "email":
					metaText(w, 200, v.email)
					return
				case "scopes":
					metaText(w, 200, strings.Join(v.scopes, "\n")+"\n")
					return
				case "identity":
					s.serveIdentity(w, r, v)
					return
				case "token":
					tok, life := tokens.mint(v.email)
					metaJSON(w, map[string]any{"access_token": tok, "expires_in": int(life / time.Second), "token_type": "Bearer"})
					return
				case "":
					if recursive {
						metaJSON(w, map[string]any{"aliases": []string{"default"}, "email": v.email, "scopes": v.scopes})
						return
					}
					metaText(w, 200, "aliases\nemail\nidentity\nscopes\ntoken\n")
					return
				}
			}
			metaText(w, http.StatusNotFound, "not found\n")
		}
	})
}

func metaText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/text")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

func metaJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write(b)
}
