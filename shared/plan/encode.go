package plan

import (
	"encoding/json"
	"fmt"
)

// envelope is the JSON form of one external action.
type envelope struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// EncodeExternal encodes the external actions of a decision, for the event
// note stored with the processed-event marker.
func EncodeExternal(actions []Action) ([]byte, error) {
	var out []envelope
	for _, a := range External(actions) {
		data, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("encoding %T: %w", a, err)
		}
		var kind string
		switch a.(type) {
		case EnsurePool:
			kind = "ensure_pool"
		case CreateResizeRequest:
			kind = "create_resize_request"
		case CancelResizeRequest:
			kind = "cancel_resize_request"
		case DeleteVMs:
			kind = "delete_vms"
		case SlurmCommand:
			kind = "slurm_command"
		case DeleteMIG:
			kind = "delete_mig"
		case Alert, Metric:
			continue // logged when decided; nothing to replay
		default:
			return nil, fmt.Errorf("encoding %T: not an external action", a)
		}
		out = append(out, envelope{Kind: kind, Data: data})
	}
	if len(out) == 0 {
		return nil, nil
	}
	return json.Marshal(out)
}

// DecodeExternal decodes what EncodeExternal wrote.
func DecodeExternal(data []byte) ([]Action, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var envs []envelope
	if err := json.Unmarshal(data, &envs); err != nil {
		return nil, fmt.Errorf("decoding actions: %w", err)
	}
	var out []Action
	for _, e := range envs {
		var a Action
		var err error
		switch e.Kind {
		case "ensure_pool":
			var x EnsurePool
			err, a = json.Unmarshal(e.Data, &x), &x
		case "create_resize_request":
			var x CreateResizeRequest
			err, a = json.Unmarshal(e.Data, &x), &x
		case "cancel_resize_request":
			var x CancelResizeRequest
			err, a = json.Unmarshal(e.Data, &x), &x
		case "delete_vms":
			var x DeleteVMs
			err, a = json.Unmarshal(e.Data, &x), &x
		case "slurm_command":
			var x SlurmCommand
			err, a = json.Unmarshal(e.Data, &x), &x
		case "delete_mig":
			var x DeleteMIG
			err, a = json.Unmarshal(e.Data, &x), &x
		default:
			return nil, fmt.Errorf("decoding actions: unknown kind %q", e.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", e.Kind, err)
		}
		out = append(out, deref(a))
	}
	return out, nil
}

func deref(a Action) Action {
	switch x := a.(type) {
	case *EnsurePool:
		return *x
	case *CreateResizeRequest:
		return *x
	case *CancelResizeRequest:
		return *x
	case *DeleteVMs:
		return *x
	case *SlurmCommand:
		return *x
	case *DeleteMIG:
		return *x
	}
	return a
}
