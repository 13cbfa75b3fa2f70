package contract

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const doc = `{
 "name": "compute", "version": "v1", "revision": "20260101",
 "parameters": {"alt": {"location": "query", "type": "string", "enum": ["json"], "description": "x"}},
 "resources": {"things": {"methods": {
  "insert": {"id": "compute.things.insert", "httpMethod": "POST", "path": "projects/{project}/things",
   "parameterOrder": ["project"],
   "parameters": {"project": {"location": "path", "type": "string", "required": true, "pattern": "[a-z]+"}},
   "request": {"$ref": "Thing"}, "response": {"$ref": "Operation"}},
  "get": {"id": "compute.things.get", "httpMethod": "GET", "path": "projects/{project}/things/{thing}",
   "response": {"$ref": "Thing"}}
 }}},
 "schemas": {
  "Thing": {"id": "Thing", "type": "object", "properties": {
   "name": {"type": "string", "pattern": "[a-z]+", "annotations": {"required": ["compute.things.insert"]}, "description": "d"},
   "part": {"$ref": "Part"},
   "tags": {"type": "array", "items": {"type": "string", "enum": ["A", "B"]}}}},
  "Part": {"id": "Part", "type": "object", "properties": {"size": {"type": "string", "format": "int64", "readOnly": true}}},
  "Operation": {"id": "Operation", "type": "object", "properties": {"name": {"type": "string"}}},
  "Unused": {"id": "Unused", "type": "object"}
 }
}`

func TestExtract(t *testing.T) {
	b, err := Extract([]byte(doc), "src", []string{"things.insert"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Extract([]byte(doc), "src", []string{"things.insert"})
	if err != nil || string(again) != string(b) {
		t.Fatalf("not deterministic: %v", err)
	}
	var c Contract
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	want := Contract{
		Source:     "src",
		Revision:   "20260101",
		Parameters: map[string]*Param{"alt": {Location: "query", Type: "string", Enum: []string{"json"}}},
		Methods: map[string]*Method{"things.insert": {
			HTTPMethod: "POST", Path: "projects/{project}/things", ParameterOrder: []string{"project"},
			Parameters: map[string]*Param{"project": {Location: "path", Type: "string", Required: true, Pattern: "[a-z]+"}},
			Request:    "Thing", Response: "Operation",
		}},
		Schemas: map[string]*Schema{
			"Thing": {Type: "object", Properties: map[string]*Schema{
				"name": {Type: "string", Pattern: "[a-z]+", RequiredBy: []string{"compute.things.insert"}},
				"part": {Ref: "Part"},
				"tags": {Type: "array", Items: &Schema{Type: "string", Enum: []string{"A", "B"}}},
			}},
			"Part":      {Type: "object", Properties: map[string]*Schema{"size": {Type: "string", Format: "int64", ReadOnly: true}}},
			"Operation": {Type: "object", Properties: map[string]*Schema{"name": {Type: "string"}}},
		},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("contract (-want +got):\n%s", diff)
	}
}

func TestExtractErrors(t *testing.T) {
	for _, tc := range []struct {
		doc     string
		methods []string
		want    string
	}{
		{doc, []string{"things.delete"}, `method "things.delete" is not in the discovery document`},
		{strings.Replace(doc, `"version": "v1"`, `"version": "beta"`, 1), []string{"things.get"}, "want compute v1"},
		{strings.Replace(doc, `"$ref": "Part"`, `"$ref": "Missing"`, 1), []string{"things.insert"}, `schema "Missing" is referenced but not defined`},
		{`{`, nil, "parsing discovery document"},
	} {
		if _, err := Extract([]byte(tc.doc), "src", tc.methods); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Extract(%v) error %v, want %q", tc.methods, err, tc.want)
		}
	}
}
