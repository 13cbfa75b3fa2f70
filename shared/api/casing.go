package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Google's JSON mapping of protocol buffers accepts a field under its proto
// name (node_pools) and under its lowerCamelCase JSON name (nodePools), and
// prints the JSON name (https://protobuf.dev/programming-guides/json/,
// "JSON Options": "the parser accepts both the lowerCamelCase name and the
// original proto field name"). shared/spec reads proto names, so request
// bodies are rewritten to them, and responses to JSON names.

// toSnake turns a lowerCamelCase name into its proto name (nodePools →
// node_pools); a name without capitals is returned as it is.
func toSnake(s string) string {
	if strings.IndexFunc(s, unicode.IsUpper) < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// toCamel turns a proto name into its JSON name (node_pools → nodePools).
func toCamel(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var b strings.Builder
	up := false
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up {
			b.WriteRune(unicode.ToUpper(r))
			up = false
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// camelPath turns a shared/spec JSON path (node_pools[1].scaling_spec) into
// the JSON names Google's field violations use (nodePools[1].scalingSpec).
func camelPath(p string) string {
	parts := strings.Split(p, ".")
	for i, part := range parts {
		name, rest, _ := strings.Cut(part, "[")
		parts[i] = toCamel(name)
		if rest != "" {
			parts[i] += "[" + rest
		}
	}
	return strings.Join(parts, ".")
}

// errRewrite is a body that is not JSON; the parse that follows (shared/spec)
// reports it with its position, so the rewrite leaves such input as it is.
var errRewrite = errors.New("not JSON")

// rewriteKeys re-encodes a JSON document with every object key passed
// through name, keeping the order of keys (and any duplicate, which
// shared/spec then reports) and every value as written.
func rewriteKeys(data []byte, name func(string) string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out bytes.Buffer
	// Each open container: object (expects a key next when wantKey) or array.
	type frame struct{ object, wantKey, first bool }
	var stack []frame
	sep := func() {
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		if f.object && !f.wantKey {
			out.WriteByte(':')
			f.wantKey = true
			return
		}
		if !f.first {
			out.WriteByte(',')
		}
		f.first = false
		if f.object {
			f.wantKey = false
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, errRewrite
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				sep()
				out.WriteByte(byte(t))
				stack = append(stack, frame{object: t == '{', wantKey: true, first: true})
			default:
				stack = stack[:len(stack)-1]
				out.WriteByte(byte(t))
			}
		case string:
			isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey
			sep()
			if isKey {
				t = name(t)
			}
			b, _ := json.Marshal(t)
			out.Write(b)
		case json.Number:
			sep()
			out.WriteString(t.String())
		case bool:
			sep()
			fmt.Fprint(&out, t)
		case nil:
			sep()
			out.WriteString("null")
		}
	}
	if len(stack) != 0 {
		return nil, errRewrite
	}
	return out.Bytes(), nil
}
