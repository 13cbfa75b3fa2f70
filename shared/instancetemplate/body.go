package instancetemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flexslurm/flexslurm/shared/naming"
	"github.com/flexslurm/flexslurm/shared/nodeconfig"
	"github.com/flexslurm/flexslurm/shared/spec"
)

// BuildPools builds the template of every pool of c that flexslurm manages
// (c.FlexPools()), by pool id: one Build per pool, once per applied spec.
// Every pool whose template cannot be built is in the error, named.
func BuildPools(c *spec.Cluster, s nodeconfig.Settings) (map[string]Template, error) {
	out := map[string]Template{}
	var errs []error
	for _, p := range c.FlexPools() {
		t, err := Build(c, p, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[p.ID] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Body is the template's body: its JSON without the name, exactly what the
// name is a hash of (naming.Template) and what a pool record keeps
// (model.Pool.TemplateBody) so that the template can be created long after
// it was built.
func (t Template) Body() string {
	t.Name = ""
	return string(t.JSON())
}

// FromBody returns template name of pool pool of cluster cluster from its
// body (Body's), as it was built: a body whose hash is not name, that holds
// a field Template does not have, or that is not exactly what Body writes
// for what it decodes to is refused, so that what is sent to Compute is
// byte for byte what the name was made from. It builds nothing.
func FromBody(cluster, pool, name, body string) (Template, error) {
	fail := func(format string, a ...any) (Template, error) {
		return Template{}, fmt.Errorf("instance template %s of pool %s: "+format, append([]any{name, pool}, a...)...)
	}
	if body == "" {
		return fail("no body")
	}
	if h := naming.Template(cluster, pool, body); h != name {
		return fail("the body is named %s by its hash", h)
	}
	var t Template
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return fail("decoding the body: %w", err)
	}
	if dec.More() {
		return fail("the body holds more than one JSON value")
	}
	if t.Name != "" || t.Body() != body {
		return fail("the body is not in the form Build writes")
	}
	t.Name = name
	return t, nil
}
