package computesim

import (
	"io"
	"net/http"
	"net/http/httptest"
)

// InProcessEndpoint is the endpoint to pass to option.WithEndpoint with an
// InProcess client: the host is never resolved (".invalid" is reserved for
// that, RFC 2606), the REST clients only build their URLs on it.
const InProcessEndpoint = "http://computesim.invalid"

// InProcess is an http.RoundTripper that serves every request by calling
// Handler (a Sim, or a layer in front of one) in the caller's goroutine.
// The real Compute REST clients, their JSON encoding and the simulator's
// routing, validation and JSON decoding all run as over a socket; only the
// loopback connection and the server's goroutines are left out, which
// makes each call several times cheaper (docs/chaos.md).
//
// The handler sees the request a net/http server would hand it: a URL with
// only a path and query, RequestURI, Host, and a loopback RemoteAddr (what
// an httptest.Server's caller has).
type InProcess struct {
	Handler http.Handler
}

// RoundTrip serves req with t.Handler.
func (t InProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	sreq := req.Clone(req.Context())
	sreq.URL.Scheme, sreq.URL.Host = "", ""
	sreq.RequestURI = req.URL.RequestURI()
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	sreq.RemoteAddr = "127.0.0.1:1"
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	t.Handler.ServeHTTP(rec, sreq)
	resp := rec.Result()
	resp.Request = req
	if resp.Body == nil {
		resp.Body = io.NopCloser(http.NoBody)
	}
	return resp, nil
}

// InProcessClient is an HTTP client whose requests h serves in-process
// (InProcess); with option.WithHTTPClient and
// option.WithEndpoint(InProcessEndpoint) it is a Compute client's transport.
func InProcessClient(h http.Handler) *http.Client {
	return &http.Client{Transport: InProcess{Handler: h}}
}
