package hooks

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNodeMetadataHost: a node hook signs at the metadata server its
// node's bootstrap recorded, and otherwise at the configured one; a node
// name that would leave the directory reads nothing.
func TestNodeMetadataHost(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "flexvm-a3u-1"+MetadataHostSuffix), []byte("127.0.0.9:8080\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "outside"+MetadataHostSuffix), []byte("127.0.0.66:80\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{VMNameDir: dir, MetadataHost: "127.0.0.1:1"}
	for node, want := range map[string]string{
		"flexvm-a3u-1":               "127.0.0.9:8080",
		"flexvm-a3u-2":               "127.0.0.1:1",
		"":                           "127.0.0.1:1",
		"../outside":                 "127.0.0.1:1",
		"." + MetadataHostSuffix[1:]: "127.0.0.1:1",
	} {
		if got := NodeMetadataHost(cfg, node); got != want {
			t.Errorf("NodeMetadataHost(%q) = %q, want %q", node, got, want)
		}
	}
	if got := NodeMetadataHost(Config{MetadataHost: "127.0.0.1:1"}, "flexvm-a3u-1"); got != "127.0.0.1:1" {
		t.Errorf("without a VM name directory: %q", got)
	}
}
