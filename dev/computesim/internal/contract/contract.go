// Package contract extracts, from the Compute Engine v1 discovery document
// shipped in the google.golang.org/api module (compute/v1/compute-api.json),
// the methods the simulator serves and every schema their requests and
// responses reach, in a compact, deterministic JSON form that the simulator
// embeds and checks each request against.
//
// Only the parts a checker needs are kept: parameter locations, types,
// formats, enums, patterns and bounds; schema properties with their types,
// formats, enums, patterns, read-only marks and the methods that require
// them (the document's annotations.required). Descriptions are dropped.
package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Module is the Go module whose discovery document is the contract.
const Module = "google.golang.org/api"

// DocPath is the Compute v1 discovery document inside Module.
const DocPath = "compute/v1/compute-api.json"

// Served lists the Compute methods (discovery ids without the "compute."
// prefix) that the simulator routes. A method routed without an entry here
// has no contract and is refused by the simulator, so adding a route means
// adding its id here and running go generate in dev/computesim.
var Served = []string{
	"autoscalers.list",
	"globalOperations.get",
	"globalOperations.wait",
	"instanceGroupManagerResizeRequests.cancel",
	"instanceGroupManagerResizeRequests.delete",
	"instanceGroupManagerResizeRequests.get",
	"instanceGroupManagerResizeRequests.insert",
	"instanceGroupManagerResizeRequests.list",
	"instanceGroupManagers.aggregatedList",
	"instanceGroupManagers.delete",
	"instanceGroupManagers.deleteInstances",
	"instanceGroupManagers.get",
	"instanceGroupManagers.insert",
	"instanceGroupManagers.list",
	"instanceGroupManagers.listManagedInstances",
	"instanceGroupManagers.resize",
	"instanceGroupManagers.setInstanceTemplate",
	"instanceGroups.list",
	"instanceTemplates.delete",
	"instanceTemplates.get",
	"instanceTemplates.insert",
	"instanceTemplates.list",
	"images.get",
	"images.getFromFamily",
	"instances.aggregatedList",
	"instances.delete",
	"instances.get",
	"instances.insert",
	"instances.list",
	"instances.reportHostAsFaulty",
	"instances.start",
	"projects.get",
	"regionInstanceGroupManagerResizeRequests.cancel",
	"regionInstanceGroupManagerResizeRequests.delete",
	"regionInstanceGroupManagerResizeRequests.get",
	"regionInstanceGroupManagerResizeRequests.insert",
	"regionInstanceGroupManagerResizeRequests.list",
	"regionInstanceGroupManagers.delete",
	"regionInstanceGroupManagers.deleteInstances",
	"regionInstanceGroupManagers.get",
	"regionInstanceGroupManagers.insert",
	"regionInstanceGroupManagers.list",
	"regionInstanceGroupManagers.listManagedInstances",
	"regionOperations.get",
	"regionOperations.wait",
	"regions.get",
	"resourcePolicies.aggregatedList",
	"resourcePolicies.delete",
	"resourcePolicies.get",
	"resourcePolicies.insert",
	"zoneOperations.get",
	"zoneOperations.wait",
	"zones.get",
}

// Contract is the extracted subset of the discovery document.
type Contract struct {
	// Source names the module version and file the contract was read from.
	Source string `json:"source"`
	// Revision is the discovery document's revision.
	Revision string `json:"revision"`
	// Parameters are the query parameters every method accepts (alt,
	// fields, prettyPrint, ...).
	Parameters map[string]*Param `json:"parameters"`
	// Methods are keyed by id without the "compute." prefix.
	Methods map[string]*Method `json:"methods"`
	// Schemas holds every schema a served method's request or response
	// reaches.
	Schemas map[string]*Schema `json:"schemas"`
}

// Method is one REST method.
type Method struct {
	HTTPMethod     string            `json:"httpMethod"`
	Path           string            `json:"path"`
	ParameterOrder []string          `json:"parameterOrder,omitempty"`
	Parameters     map[string]*Param `json:"parameters,omitempty"`
	// Request and Response are schema ids ("" when the method has none).
	Request  string `json:"request,omitempty"`
	Response string `json:"response,omitempty"`
}

// Param is one path or query parameter.
type Param struct {
	Location string   `json:"location"`
	Type     string   `json:"type"`
	Format   string   `json:"format,omitempty"`
	Enum     []string `json:"enum,omitempty"`
	Pattern  string   `json:"pattern,omitempty"`
	Required bool     `json:"required,omitempty"`
	Repeated bool     `json:"repeated,omitempty"`
	Minimum  string   `json:"minimum,omitempty"`
	Maximum  string   `json:"maximum,omitempty"`
}

// Schema is a schema or a property: a reference to a named schema, or a type
// with its constraints.
type Schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	Type                 string             `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`
	Enum                 []string           `json:"enum,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
	Minimum              string             `json:"minimum,omitempty"`
	Maximum              string             `json:"maximum,omitempty"`
	ReadOnly             bool               `json:"readOnly,omitempty"`
	RequiredBy           []string           `json:"requiredBy,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
}

// docSchema is a schema as the discovery document writes it.
type docSchema struct {
	Ref         string   `json:"$ref"`
	Type        string   `json:"type"`
	Format      string   `json:"format"`
	Enum        []string `json:"enum"`
	Pattern     string   `json:"pattern"`
	Minimum     string   `json:"minimum"`
	Maximum     string   `json:"maximum"`
	ReadOnly    bool     `json:"readOnly"`
	Annotations struct {
		Required []string `json:"required"`
	} `json:"annotations"`
	Items                *docSchema            `json:"items"`
	AdditionalProperties *docSchema            `json:"additionalProperties"`
	Properties           map[string]*docSchema `json:"properties"`
}

type docMethod struct {
	ID             string            `json:"id"`
	HTTPMethod     string            `json:"httpMethod"`
	Path           string            `json:"path"`
	ParameterOrder []string          `json:"parameterOrder"`
	Parameters     map[string]*Param `json:"parameters"`
	Request        *struct {
		Ref string `json:"$ref"`
	} `json:"request"`
	Response *struct {
		Ref string `json:"$ref"`
	} `json:"response"`
}

type docResource struct {
	Methods   map[string]*docMethod   `json:"methods"`
	Resources map[string]*docResource `json:"resources"`
}

type document struct {
	Name       string                  `json:"name"`
	Version    string                  `json:"version"`
	Revision   string                  `json:"revision"`
	Parameters map[string]*Param       `json:"parameters"`
	Resources  map[string]*docResource `json:"resources"`
	Schemas    map[string]*docSchema   `json:"schemas"`
}

// Extract builds the contract of methods from the discovery document doc.
// source is recorded as the contract's Source. The result is deterministic:
// the same document and methods always give the same bytes.
func Extract(doc []byte, source string, methods []string) ([]byte, error) {
	var d document
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("parsing discovery document: %w", err)
	}
	if d.Name != "compute" || d.Version != "v1" {
		return nil, fmt.Errorf("discovery document is %s %s, want compute v1", d.Name, d.Version)
	}
	byID := map[string]*docMethod{}
	var walk func(map[string]*docResource)
	walk = func(rs map[string]*docResource) {
		for _, r := range rs {
			for _, m := range r.Methods {
				byID[strings.TrimPrefix(m.ID, "compute.")] = m
			}
			walk(r.Resources)
		}
	}
	walk(d.Resources)

	c := &Contract{Source: source, Revision: d.Revision, Parameters: d.Parameters,
		Methods: map[string]*Method{}, Schemas: map[string]*Schema{}}
	var pending []string
	for _, id := range slices.Sorted(slices.Values(methods)) {
		m := byID[id]
		if m == nil {
			return nil, fmt.Errorf("method %q is not in the discovery document", id)
		}
		out := &Method{HTTPMethod: m.HTTPMethod, Path: m.Path, ParameterOrder: m.ParameterOrder, Parameters: m.Parameters}
		if m.Request != nil {
			out.Request = m.Request.Ref
			pending = append(pending, m.Request.Ref)
		}
		if m.Response != nil {
			out.Response = m.Response.Ref
			pending = append(pending, m.Response.Ref)
		}
		c.Methods[id] = out
	}
	for len(pending) > 0 {
		id := pending[0]
		pending = pending[1:]
		if _, done := c.Schemas[id]; done {
			continue
		}
		s := d.Schemas[id]
		if s == nil {
			return nil, fmt.Errorf("schema %q is referenced but not defined", id)
		}
		c.Schemas[id] = convert(s, &pending)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("encoding contract: %w", err)
	}
	return buf.Bytes(), nil
}

func convert(s *docSchema, pending *[]string) *Schema {
	if s == nil {
		return nil
	}
	if s.Ref != "" {
		*pending = append(*pending, s.Ref)
	}
	out := &Schema{Ref: s.Ref, Type: s.Type, Format: s.Format, Enum: s.Enum, Pattern: s.Pattern,
		Minimum: s.Minimum, Maximum: s.Maximum, ReadOnly: s.ReadOnly, RequiredBy: s.Annotations.Required,
		Items: convert(s.Items, pending), AdditionalProperties: convert(s.AdditionalProperties, pending)}
	if len(s.Properties) > 0 {
		out.Properties = map[string]*Schema{}
		for k, p := range s.Properties {
			out.Properties[k] = convert(p, pending)
		}
	}
	return out
}

// Locate returns the path of the discovery document in the module cache and
// the module version, as `go list -m -json` reports them for the main
// module's requirement.
func Locate(dir string) (path, version string, err error) {
	cmd := exec.Command("go", "list", "-m", "-json", Module)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go list -m -json %s: %w", Module, err)
	}
	var m struct {
		Version string
		Dir     string
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return "", "", fmt.Errorf("parsing go list output: %w", err)
	}
	if m.Dir == "" {
		return "", "", fmt.Errorf("module %s@%s is not in the module cache (run go mod download)", Module, m.Version)
	}
	return filepath.Join(m.Dir, filepath.FromSlash(DocPath)), m.Version, nil
}

// SourceOf is the Source recorded for a module version.
func SourceOf(version string) string { return Module + "@" + version + " " + DocPath }
