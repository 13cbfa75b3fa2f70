package computesim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flexslurm/flexslurm/dev/computesim/internal/contract"
)

// TestContractUpToDate regenerates the contract from the discovery document
// of the google.golang.org/api version go.mod requires and fails when
// contract.json differs, e.g. after a module upgrade without go generate.
func TestContractUpToDate(t *testing.T) {
	path, version, err := contract.Locate(".")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := contract.Extract(doc, contract.SourceOf(version), contract.Served)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, contractJSON) {
		t.Fatalf("contract.json is stale for %s; run go generate ./dev/computesim (-generated +embedded):\n%s",
			contract.SourceOf(version), cmp.Diff(string(want), string(contractJSON)))
	}
}

// TestRoutesMatchContract routes every contract method's documented path and
// HTTP method, and requires the router to name the same method.
func TestRoutesMatchContract(t *testing.T) {
	c := apiContract()
	if len(c.Methods) != len(contract.Served) {
		t.Fatalf("contract has %d methods, Served lists %d", len(c.Methods), len(contract.Served))
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for id, m := range c.Methods {
		path := "/compute/v1/" + param.ReplaceAllStringFunc(m.Path, func(p string) string {
			switch p {
			case "{project}":
				return "proj"
			case "{zone}":
				return "us-central1-a"
			}
			return "x"
		})
		req, aerr := route(m.HTTPMethod, path)
		if aerr != nil {
			t.Errorf("%s: %s %s is not routed: %v", id, m.HTTPMethod, path, aerr)
			continue
		}
		if req.method != id {
			t.Errorf("%s %s routes to %s, want %s", m.HTTPMethod, path, req.method, id)
		}
	}
}

// TestContractRejects sends requests real Compute rejects and checks each
// gets a 400 in Compute's error shape naming the field and value.
func TestContractRejects(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup()
	const tplBody = `{"name":"t2","properties":{"machineType":"a3-ultragpu-8g",%s}}`
	tpl := func(extra string) string { return strings.Replace(tplBody, "%s", extra, 1) }
	const migs = "/compute/v1/projects/proj/zones/us-central1-a/instanceGroupManagers"
	const tpls = "/compute/v1/projects/proj/global/instanceTemplates"
	tests := []struct {
		name, method, path, body string
		reason                   string
		msg                      string // substring of the message
	}{
		{"unknown body field", "POST", tpls, tpl(`"machineTypo":"x"`), "invalid", `Unknown name "machineTypo" at 'resource.properties'`},
		{"unknown nested field", "POST", tpls, tpl(`"scheduling":{"maxRunDurationSeconds":600}`), "invalid", `Unknown name "maxRunDurationSeconds" at 'resource.properties.scheduling'`},
		{"string for bool", "POST", tpls, tpl(`"canIpForward":"yes"`), "invalid", `'resource.properties.canIpForward' (TYPE_BOOL)`},
		{"object for string", "POST", tpls, tpl(`"description":{}`), "invalid", `'resource.properties.description' (TYPE_STRING)`},
		{"number out of int32", "POST", migs, `{"name":"m","baseInstanceName":"m","instanceTemplate":"global/instanceTemplates/tpl","targetSize":3000000000}`, "invalid", `'resource.targetSize' (TYPE_INT32)`},
		{"non-integer int64", "POST", tpls, tpl(`"scheduling":{"maxRunDuration":{"seconds":"ten"}}`), "invalid", `'resource.properties.scheduling.maxRunDuration.seconds' (TYPE_INT64)`},
		{"array for object", "POST", tpls, tpl(`"scheduling":[]`), "invalid", `'resource.properties.scheduling' (TYPE_MESSAGE)`},
		{"invalid enum", "POST", tpls, tpl(`"scheduling":{"provisioningModel":"FLEXSTART"}`), "invalid", `'resource.properties.scheduling.provisioningModel': 'FLEXSTART'. Must be one of`},
		{"invalid nested enum", "POST", migs, `{"name":"m","baseInstanceName":"m","instanceTemplate":"global/instanceTemplates/tpl","targetSize":0,"instanceLifecyclePolicy":{"defaultActionOnFailure":"NOTHING"}}`, "invalid", `'resource.instanceLifecyclePolicy.defaultActionOnFailure': 'NOTHING'`},
		{"name pattern", "POST", tpls, `{"name":"Tpl_1","properties":{"machineType":"n1"}}`, "invalid", `'resource.name': 'Tpl_1'. Must be a match of regex`},
		{"required by method", "POST", migs, `{"name":"m","baseInstanceName":"m","instanceTemplate":"global/instanceTemplates/tpl"}`, "required", `'resource.targetSize'`},
		{"empty body", "POST", tpls, ``, "required", `'resource'`},
		{"trailing data", "POST", tpls, tpl(`"description":"x"`) + `{}`, "invalid", `Invalid JSON payload`},
		{"unknown query parameter", "GET", "/compute/v1/projects/proj/zones/us-central1-a/instances?filtre=x", ``, "invalid", `Unknown name "filtre": Cannot bind query parameter`},
		{"query of another method", "GET", "/compute/v1/projects/proj/zones/us-central1-a/instances/x?maxResults=3", ``, "invalid", `Unknown name "maxResults"`},
		{"non-integer query", "GET", "/compute/v1/projects/proj/zones/us-central1-a/instances?maxResults=many", ``, "invalid", `'maxResults': 'many'`},
		{"below minimum", "GET", "/compute/v1/projects/proj/zones/us-central1-a/instances?maxResults=-1", ``, "invalid", `'maxResults': '-1'`},
		{"repeated query", "GET", "/compute/v1/projects/proj/zones/us-central1-a/instances?filter=a&filter=b", ``, "invalid", `'filter'`},
		{"bad boolean", "GET", "/compute/v1/projects/proj/zones/us-central1-a/instances?prettyPrint=yes", ``, "invalid", `'prettyPrint': 'yes'`},
		{"bad common enum", "GET", "/compute/v1/projects/proj/zones/us-central1-a/instances?alt=xml", ``, "invalid", `'alt': 'xml'`},
		{"required query", "POST", migs + "/pool/resize", ``, "required", `'size'`},
		{"path pattern", "GET", "/compute/v1/projects/proj/zones/us-central1-a/instances/Bad_Name", ``, "invalid", `'instance': 'Bad_Name'`},
		{"project pattern", "GET", "/compute/v1/projects/Proj!/zones/us-central1-a/instances", ``, "invalid", `'project': 'Proj!'`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, e.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var body struct {
				Error struct {
					Code    int
					Message string
					Errors  []struct{ Message, Domain, Reason string }
				}
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("HTTP %d, body %s: %v", resp.StatusCode, raw, err)
			}
			got := body.Error
			if resp.StatusCode != 400 || got.Code != 400 || len(got.Errors) != 1 || got.Errors[0].Domain != "global" ||
				got.Errors[0].Reason != tc.reason || got.Errors[0].Message != got.Message || !strings.Contains(got.Message, tc.msg) {
				t.Errorf("HTTP %d %s\nwant 400, reason %q, message containing %q", resp.StatusCode, raw, tc.reason, tc.msg)
			}
		})
	}
}

// TestContractAccepts covers what proto JSON, and so the API, accepts beyond
// what the Go clients send: proto field names, null, 64-bit integers as
// numbers, read-only fields (ignored).
func TestContractAccepts(t *testing.T) {
	e := newEnv(t, Options{})
	const tpls = "/compute/v1/projects/proj/global/instanceTemplates"
	for i, body := range []string{
		`{"name":"a1","properties":{"machine_type":"n1","disks":[{"boot":true,"initialize_params":{"source_image":"projects/debian-cloud/global/images/family/debian-12"}}],"scheduling":{"max_run_duration":{"seconds":600},"instance_termination_action":"DELETE"}}}`,
		`{"name":"a2","description":null,"properties":{"machineType":"n1","disks":[{"boot":true,"initializeParams":{"sourceImage":"projects/debian-cloud/global/images/family/debian-12"}}],"labels":{"k":"v"}}}`,
		`{"name":"a3","kind":"compute#instanceTemplate","id":"123","properties":{"machineType":"n1","disks":[{"boot":true,"initializeParams":{"sourceImage":"projects/debian-cloud/global/images/family/debian-12"}}],"scheduling":{"maxRunDuration":{"seconds":"600","nanos":0},"instanceTerminationAction":"DELETE"}}}`,
	} {
		resp, err := http.Post(e.srv.URL+tpls+"?alt=json&prettyPrint=False", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("body %d: HTTP %d %s", i, resp.StatusCode, raw)
		}
	}
	// gcloud's aggregated lists (`instance-groups managed list`, `instances
	// list` with no zone) send returnPartialSuccess, which the REST
	// reference documents and the discovery document leaves out; it is
	// taken on aggregated lists only.
	for path, want := range map[string]int{
		"/compute/v1/projects/proj/aggregated/instanceGroupManagers?alt=json&includeAllScopes=True&maxResults=500&returnPartialSuccess=True": 200,
		"/compute/v1/projects/proj/aggregated/instances?alt=json&includeAllScopes=True&maxResults=500&returnPartialSuccess=True":             200,
		"/compute/v1/projects/proj/zones/us-central1-a/instances?returnPartialSuccess=True":                                                  400,
	} {
		resp, err := http.Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: HTTP %d %s, want %d", path, resp.StatusCode, raw, want)
		}
	}
}

// checkResponses wraps the simulator so that every successful response in
// a test is checked against the method's documented response schema: no
// field v1 does not have, JSON types as the wire format gives them (64-bit
// integers as strings), enum values from the document.
func checkResponses(t *testing.T, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if rec.Code != 200 {
			return
		}
		req, aerr := route(r.Method, r.URL.Path)
		if aerr != nil {
			return
		}
		m := apiContract().Methods[req.method]
		if m == nil || m.Response == "" {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Errorf("%s %s: response is not JSON: %v", r.Method, r.URL.Path, err)
			return
		}
		ck := &bodyChecker{c: apiContract(), response: true}
		if aerr := ck.check("response", &contract.Schema{Ref: m.Response}, v); aerr != nil {
			t.Errorf("%s %s: response breaks the %s schema: %s", r.Method, r.URL.Path, m.Response, aerr.message)
		}
	})
}

// TestResponseCheck shows the response check (checkResponses) fails on
// what a client would not accept from Compute.
func TestResponseCheck(t *testing.T) {
	ck := &bodyChecker{c: apiContract(), response: true}
	op := &contract.Schema{Ref: "Operation"}
	for body, ok := range map[string]bool{
		`{"name":"op","id":"12","status":"DONE","progress":100}`: true,
		`{"name":"op","id":12}`:                                  false, // uint64 must be a string on the wire
		`{"name":"op","progress":"100"}`:                         false, // int32 must be a number
		`{"name":"op","status":"FINISHED"}`:                      false,
		`{"name":"op","resourceName":"x"}`:                       false, // not a v1 field
		`{"error":{"errors":[{"code":"X","message":"m"}]}}`:      true,
	} {
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if aerr := ck.check("response", op, v); (aerr == nil) != ok {
			t.Errorf("%s: error %v, want ok=%v", body, aerr, ok)
		}
	}
}

func TestPublicImages(t *testing.T) {
	e := newEnv(t, Options{})
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(e.srv.URL + "/compute/v1/projects/" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	code, im := get("debian-cloud/global/images/family/debian-12")
	if code != 200 || im["name"] != "debian-12-bookworm-v20251111" || im["status"] != "READY" {
		t.Errorf("getFromFamily: %d %v", code, im)
	}
	if code, im := get("debian-cloud/global/images/debian-12-bookworm-v20251111"); code != 200 || im["family"] != "debian-12" {
		t.Errorf("get: %d %v", code, im)
	}
	if code, _ := get("debian-cloud/global/images/family/debian-9"); code != 404 {
		t.Errorf("unknown family: HTTP %d, want 404", code)
	}
	if code, _ := get("proj/global/images/family/debian-12"); code != 404 {
		t.Errorf("family in another project: HTTP %d, want 404", code)
	}
}

// BenchmarkCheckContract measures the check of a Flex-Start template insert
// as flexslurm sends it.
func BenchmarkCheckContract(b *testing.B) {
	body := []byte(`{"name":"c1-h200-v1","description":"h200 pool","properties":{"machineType":"a3-ultragpu-8g",` +
		`"disks":[{"autoDelete":true,"boot":true,"type":"PERSISTENT","initializeParams":{"diskSizeGb":"200","diskType":"hyperdisk-balanced","sourceImage":"projects/debian-cloud/global/images/family/debian-12"}}],` +
		`"networkInterfaces":[{"network":"projects/proj/global/networks/default"}],` +
		`"scheduling":{"provisioningModel":"FLEX_START","instanceTerminationAction":"DELETE","maxRunDuration":{"seconds":"7200"},"onHostMaintenance":"TERMINATE","automaticRestart":false},` +
		`"reservationAffinity":{"consumeReservationType":"NO_RESERVATION"},"labels":{"flexslurm-pool":"h200"},` +
		`"metadata":{"items":[{"key":"startup-script","value":"echo"}]},"guestAccelerators":[{"acceleratorType":"nvidia-h200-141gb","acceleratorCount":8}],` +
		`"serviceAccounts":[{"email":"node@proj.iam.gserviceaccount.com","scopes":["https://www.googleapis.com/auth/cloud-platform"]}]}}`)
	req := &request{method: "instanceTemplates.insert", project: "proj", query: map[string][]string{"requestId": {"3fb28f4d-eef1-58a7-af0b-edf36033fe55"}}, body: body}
	for b.Loop() {
		if aerr := checkContract(req); aerr != nil {
			b.Fatal(aerr)
		}
	}
}
