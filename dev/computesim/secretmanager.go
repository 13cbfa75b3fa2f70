package computesim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// SecretManager is a minimal stand-in for the Secret Manager API
// (secretmanager.googleapis.com) beside the simulator: only
// projects.secrets.versions.access,
//
//	GET /v1/projects/P/secrets/S/versions/V:access
//
// answered as the API does (REST reference:
// https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/access,
// client google.golang.org/api/secretmanager/v1): {"name":
// "projects/P/secrets/S/versions/N", "payload": {"data": BASE64,
// "dataCrc32c": "CRC32C as a decimal string"}}; V is a version number or
// "latest" (the highest version). A missing secret or version is 404 in
// Google's error shape ({"error": {"code", "message", "status":
// "NOT_FOUND"}}). With Tokens set, a request must carry "Authorization:
// Bearer TOKEN" with a token a simulated VM's metadata server issued, else
// 401 UNAUTHENTICATED.
type SecretManager struct {
	// Tokens, when set, are the only access tokens accepted.
	Tokens *Tokens

	mu       sync.Mutex
	versions map[string][][]byte // "projects/P/secrets/S" → versions 1..n
}

// AddVersion adds a version holding payload to secret
// "projects/P/secrets/S" and returns its number.
func (m *SecretManager) AddVersion(secret string, payload []byte) (int, error) {
	if !secretNameRE.MatchString(secret) {
		return 0, fmt.Errorf("secret %q: want projects/P/secrets/S", secret)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.versions == nil {
		m.versions = map[string][][]byte{}
	}
	m.versions[secret] = append(m.versions[secret], append([]byte(nil), payload...))
	return len(m.versions[secret]), nil
}

var (
	secretNameRE   = regexp.MustCompile(`^projects/[^/]+/secrets/[A-Za-z0-9_-]{1,255}$`)
	secretAccessRE = regexp.MustCompile(`^/v1/(projects/[^/]+/secrets/[A-Za-z0-9_-]{1,255})/versions/(latest|[1-9][0-9]*):access$`)
)

func (m *SecretManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sub := secretAccessRE.FindStringSubmatch(r.URL.Path)
	if sub == nil || r.Method != http.MethodGet {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL "+r.URL.Path+" was not found on this server.")
		return
	}
	if m.Tokens != nil {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, valid := m.Tokens.Valid(tok); !ok || !valid {
			googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED",
				"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
			return
		}
	}
	secret, ver := sub[1], sub[2]
	m.mu.Lock()
	vs := m.versions[secret]
	n := len(vs)
	if ver != "latest" {
		n, _ = strconv.Atoi(ver)
	}
	var payload []byte
	if n >= 1 && n <= len(vs) {
		payload = vs[n-1]
	}
	m.mu.Unlock()
	if payload == nil {
		if len(vs) == 0 {
			googleError(w, http.StatusNotFound, "NOT_FOUND", "Secret ["+secret+"] not found or has no versions.")
		} else {
			googleError(w, http.StatusNotFound, "NOT_FOUND", "Secret Version ["+secret+"/versions/"+ver+"] not found.")
		}
		return
	}
	body, _ := json.Marshal(map[string]any{
		"name": fmt.Sprintf("%s/versions/%d", secret, n),
		"payload": map[string]string{
			"data":       base64.StdEncoding.EncodeToString(payload),
			"dataCrc32c": strconv.FormatUint(uint64(crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli))), 10),
		},
	})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(body)
}

// googleError writes the error shape of Google's JSON APIs
// (https://cloud.google.com/apis/design/errors#http_mapping).
func googleError(w http.ResponseWriter, code int, status, message string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message, "status": status}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
