package api_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexslurm/flexslurm/shared/api"
)

const settingsJSON = `{
  "image": "projects/debian-cloud/global/images/family/debian-12",
  "service_account": "flexslurm-node@p.iam.gserviceaccount.com",
  "conf_server": "flexvm-controller",
  "munge_key_secret": "projects/p/secrets/flexvm-munge-key/versions/latest",
  "home": {"type": "nfs", "source": "10.0.0.2:/home", "dir": "/home"},
  "topics": {"jobs": "job-pending", "health": "health-failure"}
}`

// FLEXSLURM_NODE_SETTINGS is JSON text or a file, read strictly.
func TestLoadNodeSettings(t *testing.T) {
	s, err := api.LoadNodeSettings(settingsJSON)
	if err != nil || s.ConfServer != "flexvm-controller" {
		t.Fatalf("JSON: %+v %v", s, err)
	}
	path := filepath.Join(t.TempDir(), "node-settings.json")
	if err := os.WriteFile(path, []byte(settingsJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := api.LoadNodeSettings(path); err != nil || s.ServiceAccount != "flexslurm-node@p.iam.gserviceaccount.com" {
		t.Fatalf("file: %+v %v", s, err)
	}
	for _, bad := range []string{
		strings.Replace(settingsJSON, `"conf_server"`, `"conf_srv"`, 1), // unknown field
		`{"image": ""}`, // invalid
		filepath.Join(t.TempDir(), "missing.json"),
	} {
		if _, err := api.LoadNodeSettings(bad); err == nil {
			t.Errorf("accepted %.60q", bad)
		}
	}
}
