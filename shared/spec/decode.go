package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
)

// maxDepth bounds JSON nesting. The schema is six levels deep
// (node_pools[i].machine_spec.reservation_affinity.values[j]); anything much
// deeper is not a cluster spec.
const maxDepth = 64

type kind int

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	default:
		return "object"
	}
}

// value is one node of a decoded JSON document that keeps object keys in
// document order. pos numbers values in the order they start; end is the
// number after the value's last descendant, so a problem placed at end sorts
// after everything inside the value and before whatever follows it.
type value struct {
	kind   kind
	text   string // string contents, or number literal
	b      bool
	keys   []string
	fields map[string]*value
	elems  []*value
	pos    int
	end    int
}

// describe renders the value for messages: strings quoted, numbers and
// booleans literally, containers by kind.
func (v *value) describe() string {
	switch v.kind {
	case kindString:
		return strconv.Quote(v.text)
	case kindNumber:
		return v.text
	case kindBool:
		return strconv.FormatBool(v.b)
	case kindNull:
		return "null"
	default:
		return "an " + v.kind.String()
	}
}

// decodeTree decodes one JSON value from data into a tree. Duplicate object
// keys, nesting beyond maxDepth, syntax errors and trailing data are
// reported as a single problem located at the value being read.
func decodeTree(data []byte) (*value, *Problem) {
	d := &treeDecoder{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	d.dec.UseNumber()
	tok, err := d.dec.Token()
	if err == io.EOF {
		return nil, &Problem{Message: "cluster spec is empty; expected a JSON object"}
	}
	if err != nil {
		return nil, d.syntax("", err)
	}
	root, perr := d.value(tok, "", 1)
	if perr != nil {
		return nil, perr
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return nil, &Problem{Message: fmt.Sprintf("unexpected data after the JSON value at %s", d.at(d.dec.InputOffset()))}
	}
	return root, nil
}

type treeDecoder struct {
	dec  *json.Decoder
	data []byte
	next int
}

// at says where byte i (0-based) of the input is, for an editor: "line L,
// column C (byte offset i)", lines and columns counted from 1, columns in
// bytes.
func (d *treeDecoder) at(i int64) string {
	i = min(max(i, 0), int64(len(d.data)))
	before := d.data[:i]
	line := bytes.Count(before, []byte("\n")) + 1
	col := i - int64(bytes.LastIndexByte(before, '\n'))
	return fmt.Sprintf("line %d, column %d (byte offset %d)", line, col, i)
}

func (d *treeDecoder) syntax(path string, err error) *Problem {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// The token reader's Offset is not always the input's; a scan
		// of the whole input finds the offending byte, the last one read.
		off := se.Offset
		var whole any
		if err := json.Unmarshal(d.data, &whole); errors.As(err, &se) {
			off = se.Offset - 1
		}
		return &Problem{Path: path, Message: fmt.Sprintf("invalid JSON at %s: %s", d.at(off), se.Error())}
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Problem{Path: path, Message: "invalid JSON: unexpected end of input"}
	}
	return &Problem{Path: path, Message: fmt.Sprintf("invalid JSON at %s: %s", d.at(d.dec.InputOffset()), err.Error())}
}

func (d *treeDecoder) value(tok json.Token, path string, depth int) (*value, *Problem) {
	v := &value{pos: d.next}
	d.next++
	switch t := tok.(type) {
	case nil:
		v.kind = kindNull
	case bool:
		v.kind, v.b = kindBool, t
	case json.Number:
		v.kind, v.text = kindNumber, string(t)
	case string:
		v.kind, v.text = kindString, t
	case json.Delim:
		if depth > maxDepth {
			return nil, &Problem{Path: path, Message: fmt.Sprintf("JSON is nested deeper than %d levels", maxDepth)}
		}
		switch t {
		case '{':
			v.kind = kindObject
			v.fields = map[string]*value{}
			for {
				tok, err := d.dec.Token()
				if err != nil {
					return nil, d.syntax(path, err)
				}
				if tok == json.Delim('}') {
					break
				}
				key, ok := tok.(string)
				if !ok {
					return nil, &Problem{Path: path, Message: fmt.Sprintf("invalid JSON at %s: expected an object key", d.at(d.dec.InputOffset()))}
				}
				kpath := joinKey(path, key)
				if _, dup := v.fields[key]; dup {
					return nil, &Problem{Path: kpath, Message: fmt.Sprintf("duplicate field %q", key)}
				}
				tok, err = d.dec.Token()
				if err != nil {
					return nil, d.syntax(kpath, err)
				}
				child, perr := d.value(tok, kpath, depth+1)
				if perr != nil {
					return nil, perr
				}
				v.keys = append(v.keys, key)
				v.fields[key] = child
			}
		case '[':
			v.kind = kindArray
			for i := 0; ; i++ {
				tok, err := d.dec.Token()
				if err != nil {
					return nil, d.syntax(path, err)
				}
				if tok == json.Delim(']') {
					break
				}
				child, perr := d.value(tok, joinIndex(path, i), depth+1)
				if perr != nil {
					return nil, perr
				}
				v.elems = append(v.elems, child)
			}
		default:
			return nil, &Problem{Path: path, Message: fmt.Sprintf("invalid JSON at %s: unexpected %q", d.at(d.dec.InputOffset()), rune(t))}
		}
	default:
		return nil, &Problem{Path: path, Message: fmt.Sprintf("invalid JSON: unexpected token %v", tok)}
	}
	v.end = d.next
	d.next++
	return v, nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// joinKey appends an object key to a JSON path: ".key" for identifiers,
// `["key"]` otherwise.
func joinKey(path, key string) string {
	if !identRE.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// joinIndex appends an array index to a JSON path.
func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
