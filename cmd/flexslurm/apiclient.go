package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/api/idtoken"

	"github.com/flexslurm/flexslurm/shared/spec"
)

// EnvAPIURL is the API function's URL, the default of apply --api.
const EnvAPIURL = "FLEXSLURM_API_URL"

// EnvAPIToken is an identity token for the API (e.g. `gcloud auth
// print-identity-token`), used when no credentials of the environment can
// mint one (user credentials cannot: idtoken.NewClient needs a service
// account's).
const EnvAPIToken = "FLEXSLURM_API_TOKEN"

// apiClient calls the API function. Deployed (https) it sends an identity
// token whose audience is the function's URL, as Cloud Run's invoker check
// wants (https://cloud.google.com/run/docs/authenticating/service-to-service);
// locally (http) it sends none.
type apiClient struct {
	base string
	hc   *http.Client
	tok  string
}

func newAPIClient(ctx context.Context, base string) (*apiClient, error) {
	base = strings.TrimRight(base, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("--api %q: want the API function's URL, https://… (or http://127.0.0.1:PORT locally)", base)
	}
	c := &apiClient{base: base, hc: &http.Client{Timeout: 60 * time.Second}}
	if u.Scheme == "http" {
		return c, nil
	}
	if t := os.Getenv(EnvAPIToken); t != "" {
		c.tok = t
		return c, nil
	}
	hc, err := idtoken.NewClient(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("no identity token for %s: %v (with user credentials, set %s=$(gcloud auth print-identity-token))", base, err, EnvAPIToken)
	}
	hc.Timeout = 60 * time.Second
	c.hc = hc
	return c, nil
}

// apiResponse is a decoded response: the HTTP status and the JSON object.
type apiResponse struct {
	status int
	body   map[string]any
}

func (c *apiClient) call(ctx context.Context, method, path string, body []byte) (apiResponse, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return apiResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.tok != "" {
		req.Header.Set("Authorization", "Bearer "+c.tok)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return apiResponse{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return apiResponse{}, err
	}
	out := apiResponse{status: resp.StatusCode}
	if err := json.Unmarshal(b, &out.body); err != nil {
		return out, fmt.Errorf("%s %s: HTTP %d, not a JSON object: %.200s", method, path, resp.StatusCode, b)
	}
	return out, nil
}

// describeStatus renders a google.rpc.Status (or Google's HTTP error
// object), one line per field violation.
func describeStatus(e map[string]any) string {
	var b strings.Builder
	status, _ := e["status"].(string)
	if status == "" {
		if c, ok := e["code"].(float64); ok {
			status = fmt.Sprintf("code %d", int(c))
		}
	}
	fmt.Fprintf(&b, "%s: %v", status, e["message"])
	details, _ := e["details"].([]any)
	for _, d := range details {
		dm, _ := d.(map[string]any)
		vs, _ := dm["fieldViolations"].([]any)
		for _, v := range vs {
			vm, _ := v.(map[string]any)
			fmt.Fprintf(&b, "\n  %v: %v", vm["field"], vm["description"])
		}
	}
	return b.String()
}

// applyViaAPI creates cluster c (or, when it exists, updates it with the
// whole resource) through the API, sending the spec file's bytes as they
// are, and waits up to wait for the operation (0: does not wait).
func applyViaAPI(ctx context.Context, c *apiClient, cl *spec.Cluster, body []byte, wait time.Duration, stdout, stderr io.Writer) int {
	coll := "/v1beta1/projects/" + cl.Project + "/locations/" + cl.Region + "/modelDevelopmentClusters"
	got, err := c.call(ctx, http.MethodGet, coll+"/"+cl.ID, nil)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	method, path, verb := http.MethodPatch, coll+"/"+cl.ID, "update"
	switch {
	case got.status == http.StatusNotFound:
		method, path, verb = http.MethodPost, coll+"?modelDevelopmentClusterId="+cl.ID, "create"
	case got.status != http.StatusOK:
		e, _ := got.body["error"].(map[string]any)
		fmt.Fprintf(stderr, "flexslurm apply: reading cluster %s: %s\n", cl.ID, describeStatus(e))
		return 1
	}
	r, err := c.call(ctx, method, path, body)
	if err != nil {
		fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
		return 1
	}
	if r.status != http.StatusOK {
		e, _ := r.body["error"].(map[string]any)
		fmt.Fprintf(stderr, "flexslurm apply: %s of cluster %s refused: %s\n", verb, cl.ID, describeStatus(e))
		return 1
	}
	op, _ := r.body["name"].(string)
	fmt.Fprintf(stdout, "cluster %s: %s started, operation %s\n", cl.ID, verb, op)
	if wait <= 0 {
		return 0
	}
	deadline := time.Now().Add(wait)
	for {
		if done, _ := r.body["done"].(bool); done {
			if e, ok := r.body["error"].(map[string]any); ok {
				fmt.Fprintf(stderr, "flexslurm apply: operation %s failed: %s\n", op, describeStatus(e))
				return 1
			}
			fmt.Fprintf(stdout, "cluster %s: %s done (ScaleUp applied the spec)\n", cl.ID, verb)
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "flexslurm apply: operation %s not done after %s; follow it with: curl %s/v1/%s\n", op, wait, c.base, op)
			return 1
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "flexslurm apply: %v\n", ctx.Err())
			return 1
		case <-time.After(time.Second):
		}
		if r, err = c.call(ctx, http.MethodGet, "/v1/"+op, nil); err != nil {
			fmt.Fprintf(stderr, "flexslurm apply: %v\n", err)
			return 1
		}
		if r.status != http.StatusOK {
			e, _ := r.body["error"].(map[string]any)
			fmt.Fprintf(stderr, "flexslurm apply: reading operation %s: %s\n", op, describeStatus(e))
			return 1
		}
	}
}
