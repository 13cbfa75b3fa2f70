package nodeconfig

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func validSettings() Settings {
	return Settings{
		Image:          "projects/schedmd-slurm-public/global/images/family/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570",
		ServiceAccount: "flexslurm-node@p.iam.gserviceaccount.com",
		ConfServer:     "flexvm-controller:6817",
		MungeKeySecret: "projects/p/secrets/flexvm-munge-key/versions/latest",
		Home:           Mount{Type: MountNFS, Source: "10.0.0.2:/home", Dir: "/home"},
		Topics:         Topics{Jobs: "job-pending", Health: "health-failure"},
		BinaryURL:      "gs://p-flexslurm/bin/flexslurm-v1",
	}
}

func TestSettingsValidate(t *testing.T) {
	s := validSettings()
	if err := s.Validate(false); err != nil {
		t.Fatalf("settings file: %v", err)
	}
	if err := s.Validate(true); err == nil || !strings.HasPrefix(err.Error(), "image:") {
		t.Errorf("an image family in applied settings: got %v", err)
	}
	s.Image = "projects/schedmd-slurm-public/global/images/slurm-gcp-6-10-ubuntu-2204-lts-nvidia-570-v20251112"
	if err := s.Validate(true); err != nil {
		t.Errorf("resolved settings: %v", err)
	}
	s.ServiceAccount = "123456789012-compute@developer.gserviceaccount.com"
	if err := s.Validate(true); err != nil {
		t.Errorf("the Compute default account: %v", err)
	}
	for field, mutate := range map[string]func(*Settings){
		"image":            func(s *Settings) { s.Image = "debian-12" },
		"pool_images.a3u":  func(s *Settings) { s.PoolImages = map[string]string{"a3u": "global/images/x"} },
		"service_account":  func(s *Settings) { s.ServiceAccount = "node" },
		"conf_server":      func(s *Settings) { s.ConfServer = "" },
		"munge_key_secret": func(s *Settings) { s.MungeKeySecret = "key" },
		"home.source":      func(s *Settings) { s.Home.Source = "home" },
		"topics.health":    func(s *Settings) { s.Topics.Health = "" },
		"binary_url":       func(s *Settings) { s.BinaryURL = "gs://b/x'; rm -rf /" },
	} {
		s := validSettings()
		mutate(&s)
		err := s.Validate(false)
		if err == nil || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: got %v, want an error naming it", field, err)
		}
	}
}

func TestParseImage(t *testing.T) {
	for ref, want := range map[string][3]string{
		"projects/debian-cloud/global/images/family/debian-12":             {"debian-cloud", "debian-12", "family"},
		"projects/debian-cloud/global/images/debian-12-bookworm-v20251111": {"debian-cloud", "debian-12-bookworm-v20251111", ""},
	} {
		p, n, fam, err := ParseImage(ref)
		if err != nil || p != want[0] || n != want[1] || fam != (want[2] == "family") {
			t.Errorf("ParseImage(%s) = %s %s %t %v", ref, p, n, fam, err)
		}
	}
	for _, bad := range []string{"", "debian-12", "global/images/x", "https://www.googleapis.com/compute/v1/projects/p/global/images/x", "projects/p/global/images/Family/X"} {
		if _, _, _, err := ParseImage(bad); err == nil {
			t.Errorf("ParseImage(%q) accepted", bad)
		}
	}
}

// The startup script installs the binary only when the URL changed, then
// runs the bootstrap: run it with stand-ins for gcloud and the binary.
func TestStartupScriptIdempotent(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sbin", "flexslurm")
	stamp := filepath.Join(dir, "state", "binary-url")
	fake := filepath.Join(dir, "fakebin")
	if err := os.MkdirAll(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	// gcloud storage cp URL DEST writes a binary that logs its arguments.
	gcloud := "#!/bin/bash\necho \"$3\" >>" + filepath.Join(dir, "downloads") + "\nprintf '#!/bin/bash\\necho ran \"$@\" >>" + filepath.Join(dir, "runs") + "\\n' >\"$4\"\n"
	if err := os.WriteFile(filepath.Join(fake, "gcloud"), []byte(gcloud), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(url string) {
		t.Helper()
		script := StartupScript(url)
		script = strings.ReplaceAll(script, BinaryPath, bin)
		script = strings.ReplaceAll(script, "/var/lib/flexslurm/binary-url", stamp)
		script = strings.ReplaceAll(script, "/var/lib/flexslurm", filepath.Dir(stamp))
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("startup script: %v\n%s", err, out)
		}
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	run("gs://b/flexslurm-v1")
	run("gs://b/flexslurm-v1")
	if got := read("downloads"); got != "gs://b/flexslurm-v1\n" {
		t.Errorf("downloads after two boots = %q, want one", got)
	}
	run("gs://b/flexslurm-v2")
	if got := read("downloads"); got != "gs://b/flexslurm-v1\ngs://b/flexslurm-v2\n" {
		t.Errorf("downloads after a new URL = %q", got)
	}
	if got := read("runs"); got != "ran node boot\nran node boot\nran node boot\n" {
		t.Errorf("runs = %q, want node boot at every boot", got)
	}
	if s := StartupScript(""); strings.Contains(s, "gcloud") || !strings.Contains(s, `exec "$bin" node boot`) {
		t.Errorf("script without a URL:\n%s", s)
	}
}
