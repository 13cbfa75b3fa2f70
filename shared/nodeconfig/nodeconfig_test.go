package nodeconfig

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func valid() Config {
	return Config{
		Version: Version, Cluster: "flexvm", Pool: "a3u", Project: "p",
		ConfServer:     "flexvm-controller:6817",
		MungeKeySecret: "projects/p/secrets/flexvm-munge-key/versions/latest",
		Home:           Mount{Storage: "projects/p/locations/us-central1-a/instances/home", Type: MountNFS, Source: "10.0.0.2:/home", Dir: "/home"},
		GPUCount:       8,
		Topics:         Topics{Jobs: "job-pending", Health: "health-failure"},
	}
}

func TestRoundTrip(t *testing.T) {
	s, err := valid().Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(valid(), got); d != "" {
		t.Fatalf("round trip (-want +got):\n%s", d)
	}
}

func TestValidateNamesEachField(t *testing.T) {
	for field, mutate := range map[string]func(*Config){
		"version":          func(c *Config) { c.Version = 2 },
		"cluster":          func(c *Config) { c.Cluster = "Flex VM" },
		"pool":             func(c *Config) { c.Pool = "" },
		"project":          func(c *Config) { c.Project = "" },
		"conf_server":      func(c *Config) { c.ConfServer = "" },
		"munge_key_secret": func(c *Config) { c.MungeKeySecret = "flexvm-munge-key" },
		"home.type":        func(c *Config) { c.Home.Type = "smb" },
		"home.source":      func(c *Config) { c.Home.Source = "/export" },
		"home.dir":         func(c *Config) { c.Home.Dir = "home" },
		"gpu_count":        func(c *Config) { c.GPUCount = -1 },
		"topics.jobs":      func(c *Config) { c.Topics.Jobs = "" },
		"topics.health":    func(c *Config) { c.Topics.Health = "" },
	} {
		c := valid()
		mutate(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("%s: got %v, want an error naming %s", field, err, field)
		}
	}
	c := valid()
	c.Home = Mount{Type: MountBind, Source: "/srv/home", Dir: "/home"}
	if err := c.Validate(); err != nil {
		t.Errorf("bind mount: %v", err)
	}
}

func TestDecodeRejectsUnknownFields(t *testing.T) {
	s, _ := valid().Encode()
	s = strings.Replace(s, `{"version":1`, `{"version":1,"extra":true`, 1)
	if _, err := Decode(s); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Fatalf("got %v, want an error naming the unknown field", err)
	}
	if _, err := Decode(`{"version":1} {}`); err == nil {
		t.Fatal("trailing data accepted")
	}
}
