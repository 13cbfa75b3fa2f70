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
		case DeleteResizeRequest:
			kind = "delete_resize_request"
		case DeleteVMs:
			kind = "delete_vms"
		case SlurmCommand:
			kind = "slurm_command"
		case DeleteMIG:
			kind = "delete_mig"
		case ReportHostAsFaulty:
			kind = "report_host_as_faulty"
		case StartVM:
			kind = "start_vm"
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
			a, err = decodeAs[EnsurePool](e.Data)
		case "create_resize_request":
			a, err = decodeAs[CreateResizeRequest](e.Data)
		case "cancel_resize_request":
			a, err = decodeAs[CancelResizeRequest](e.Data)
		case "delete_resize_request":
			a, err = decodeAs[DeleteResizeRequest](e.Data)
		case "delete_vms":
			a, err = decodeAs[DeleteVMs](e.Data)
		case "slurm_command":
			a, err = decodeAs[SlurmCommand](e.Data)
		case "delete_mig":
			a, err = decodeAs[DeleteMIG](e.Data)
		case "report_host_as_faulty":
			a, err = decodeAs[ReportHostAsFaulty](e.Data)
		case "start_vm":
			a, err = decodeAs[StartVM](e.Data)
		default:
			return nil, fmt.Errorf("decoding actions: unknown kind %q", e.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", e.Kind, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func decodeAs[T Action](data []byte) (Action, error) {
	var x T
	err := json.Unmarshal(data, &x)
	return x, err
}
