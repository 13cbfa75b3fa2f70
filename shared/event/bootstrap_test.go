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

func TestDecodeVersionMismatch(t *testing.T) {
	ok := `{"version":1,"type":"node.version_mismatch","cluster":"flexvm","node":"flexvm-a3u-1","vm_name":"flexvm-a3u-1-g3","node_version":"v1.1.0-2-gabcdef0-dirty","functions_version":"v1.2.0+0123456789ab"}`
	v, err := DecodeVersionMismatch([]byte(ok))
	if err != nil || v.Node != "flexvm-a3u-1" || v.VMName != "flexvm-a3u-1-g3" || v.NodeVersion != "v1.1.0-2-gabcdef0-dirty" || v.FunctionsVersion != "v1.2.0+0123456789ab" {
		t.Fatalf("%+v, %v", v, err)
	}
	for name, bad := range map[string]string{
		"type":               strings.Replace(ok, "node.version_mismatch", "node.bootstrap_failed", 1),
		"vm of another node": strings.Replace(ok, "flexvm-a3u-1-g3", "flexvm-a3u-2-g3", 1),
		"empty version":      strings.Replace(ok, `"v1.1.0-2-gabcdef0-dirty"`, `""`, 1),
		"version with space": strings.Replace(ok, `"v1.1.0-2-gabcdef0-dirty"`, `"v1 rm -rf"`, 1),
		"long version":       strings.Replace(ok, `"v1.2.0+0123456789ab"`, `"`+strings.Repeat("1", MaxVersionBytes+1)+`"`, 1),
		"same versions":      strings.Replace(ok, `"v1.2.0+0123456789ab"`, `"v1.1.0-2-gabcdef0-dirty"`, 1),
		"unknown field":      strings.Replace(ok, `"node_version"`, `"extra":1,"node_version"`, 1),
	} {
		if _, err := DecodeVersionMismatch([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}
