package event

import (
	"bytes"
	"encoding/json"
	"errors"
)

// The decoders as they were with encoding/json (v1), kept to check that
// the decoders of encoding/json/v2 accept no payload they refused and
// refuse one they accepted only where v2 is meant to be stricter
// (TestDecodeAgreesWithV1, FuzzDecodeAgreesWithV1).

var errV1Trailing = errors.New("trailing data after the JSON payload")

// v1DecodeStrictRest is decodeStrictRest with encoding/json's Decoder and
// DisallowUnknownFields.
func v1DecodeStrictRest(data []byte, v any) (rest bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false, err
	}
	if dec.More() {
		return false, errV1Trailing
	}
	return len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0, nil
}

// v1PeekHeader is PeekHeader's decode with encoding/json.
func v1PeekHeader(data []byte) (Header, error) {
	var h Header
	err := json.Unmarshal(data, &h)
	return h, err
}

// v1Envelope is the Pub/Sub envelope as encoding/json decoded it, data a
// []byte.
type v1Envelope struct {
	Message struct {
		Data        []byte            `json:"data"`
		Attributes  map[string]string `json:"attributes"`
		MessageID   string            `json:"messageId"`
		MessageID2  string            `json:"message_id"`
		PublishTime string            `json:"publishTime"`
	} `json:"message"`
	Subscription string `json:"subscription"`
}
