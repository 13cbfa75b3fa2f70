package event

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeBootstrap(t *testing.T) {
	ok := `{"version":1,"type":"node.bootstrap_failed","cluster":"flexvm","node":"flexvm-a3u-1","vm_name":"flexvm-a3u-1-g3","step":"munge_key","error":"404"}`
	b, err := DecodeBootstrap([]byte(ok))
	if err != nil || b.Node != "flexvm-a3u-1" || b.VMName != "flexvm-a3u-1-g3" || b.Step != BootstrapStepMungeKey {
		t.Fatalf("%+v, %v", b, err)
	}
	for name, bad := range map[string]string{
		"type":                  strings.Replace(ok, "node.bootstrap_failed", "node.suspend", 1),
		"vm of another node":    strings.Replace(ok, "flexvm-a3u-1-g3", "flexvm-a3u-2-g3", 1),
		"vm without generation": strings.Replace(ok, "flexvm-a3u-1-g3", "flexvm-a3u-1-g", 1),
		"step":                  strings.Replace(ok, "munge_key", "coffee", 1),
		"unknown field":         strings.Replace(ok, `"error"`, `"extra":1,"error"`, 1),
		"long error":            strings.Replace(ok, `"404"`, `"`+strings.Repeat("x", 513)+`"`, 1),
	} {
		if _, err := DecodeBootstrap([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}
