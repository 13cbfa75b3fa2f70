package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
)

// Google's metadata server: 169.254.169.254 (also metadata.google.internal)
// and, on VMs with IPv6, fd20:ce::254
// (https://cloud.google.com/compute/docs/metadata/querying-metadata,
// https://cloud.google.com/compute/docs/metadata/overview). Besides HTTP
// on port 80 it serves HTTPS on 443 on Shielded VMs
// (https://cloud.google.com/compute/docs/metadata/overview#https-mds, and
// the "MTLS MDS" section of GoogleCloudPlatform/guest-agent's README,
// whose client credentials the agent stores on the VM's disk), and it is
// the VM's DNS resolver on port 53. The rule covers every TCP port but
// 53, so it does not depend on that list being complete.
const (
	MetadataIPv4 = "169.254.169.254"
	MetadataIPv6 = "fd20:ce::254"
)

// Rule is one firewall rule: the program (IptablesPath or Ip6tablesPath)
// and its arguments after -C/-I/-D OUTPUT.
type Rule struct {
	Program string
	Args    []string
}

func (r Rule) String() string { return r.Program + " -w -I OUTPUT " + strings.Join(r.Args, " ") }

// MetadataFirewall keeps every user but root and Allow from the metadata
// server: the token of the VM's service account is one HTTP request away
// for any process that reaches it.
//
// For Google's server (169.254.169.254) the rules cover every TCP port
// but 53 (DNS, which users need and which serves no credentials), and, with
// IPv6, the same for fd20:ce::254 through ip6tables. For another address
// (a simulated VM's metadata server) they cover every TCP port of that
// address too — except on 127.0.0.1, which every local service shares: there
// only the server's own port is covered.
type MetadataFirewall struct {
	// Host is the metadata server as IP:PORT (GCE_METADATA_HOST).
	Host string
	// Allow are the uids besides root that may reach it (the SlurmUser on
	// the controller).
	Allow []int
	// IPv6 adds the rule for Google's IPv6 address.
	IPv6 bool
}

// Google reports whether Host is Google's metadata server.
func (m MetadataFirewall) Google() bool {
	h, _, err := net.SplitHostPort(m.Host)
	return err == nil && h == MetadataIPv4
}

// Rules returns the rules, IPv4 first.
func (m MetadataFirewall) Rules() ([]Rule, error) {
	h, port, err := net.SplitHostPort(m.Host)
	if err != nil {
		return nil, fmt.Errorf("metadata host %q: want IP:PORT: %w", m.Host, err)
	}
	ip := net.ParseIP(h)
	if ip == nil || ip.To4() == nil {
		return nil, fmt.Errorf("metadata host %q: want an IPv4 address (iptables)", m.Host)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("metadata host %q: port %q is not 1–65535", m.Host, port)
	}
	uids := []int{0}
	for _, u := range m.Allow {
		if u < 0 {
			return nil, fmt.Errorf("allowed uid %d is negative", u)
		}
		if !slices.Contains(uids, u) {
			uids = append(uids, u)
		}
	}
	ports := []string{"!", "--dport", "53"}
	if ip.Equal(net.IPv4(127, 0, 0, 1)) {
		ports = []string{"--dport", port}
	}
	args := func(dst string) []string {
		a := append([]string{"-d", dst, "-p", "tcp"}, ports...)
		for _, u := range uids {
			a = append(a, "-m", "owner", "!", "--uid-owner", strconv.Itoa(u))
		}
		return append(a, "-j", "REJECT", "--reject-with", "tcp-reset")
	}
	rules := []Rule{{IptablesPath, args(ip.String() + "/32")}}
	if m.IPv6 {
		rules = append(rules, Rule{Ip6tablesPath, args(MetadataIPv6 + "/128")})
	}
	return rules, nil
}

// FirewallRule returns the iptables arguments of the rule that keeps every
// user but root from the metadata server at host ("IP:PORT"): the IPv4
// rule of MetadataFirewall{Host: host}.
func FirewallRule(host string) ([]string, error) {
	rules, err := MetadataFirewall{Host: host}.Rules()
	if err != nil {
		return nil, err
	}
	return rules[0].Args, nil
}

// metadataHostPort completes a GCE_METADATA_HOST value without a port
// (the client then uses port 80).
func metadataHostPort(h string) string {
	if _, _, err := net.SplitHostPort(h); err != nil {
		return net.JoinHostPort(h, "80")
	}
	return h
}

// IPv6Addresses reads the kernel's IPv6 addresses (/proc/net/if_inet6:
// address, interface index, prefix length, scope, flags, name per line).
// enabled is false when the file does not exist (no IPv6 in this kernel);
// routable names an interface with an address of global scope (global or
// unique local: fd20:ce::254 can be routed to), "" when there is none.
func IPv6Addresses(path string) (enabled bool, routable string, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue
		}
		enabled = true
		if f[3] == "00" && f[5] != "lo" {
			return true, f[5], nil
		}
	}
	return enabled, "", nil
}

// ipv6Rule decides whether the IPv6 rule applies: when ip6tables exists
// and the kernel has IPv6. A host with a routable IPv6 address but no
// ip6tables cannot be protected: the step fails rather than leave
// [fd20:ce::254] open to users.
func ipv6Rule(ip6tables, ifInet6 string) (bool, error) {
	enabled, routable, err := IPv6Addresses(ifInet6)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", ifInet6, err)
	}
	if !enabled {
		return false, nil
	}
	if _, err := os.Stat(ip6tables); err != nil {
		if routable != "" {
			return false, fmt.Errorf("IPv6 is up (a routable address on %s) but %s is missing: users could reach the metadata server at [%s]; install ip6tables", routable, ip6tables, MetadataIPv6)
		}
		return false, nil
	}
	return true, nil
}

// MetadataRules returns fw's rules, the IPv6 one included for Google's
// server when ipv6Rule says so (ip6tables and the kernel's IPv6 addresses
// at those paths), its program then ip6tables.
func MetadataRules(fw MetadataFirewall, ip6tables, ifInet6 string) ([]Rule, error) {
	if fw.Google() && !fw.IPv6 {
		v6, err := ipv6Rule(ip6tables, ifInet6)
		if err != nil {
			return nil, err
		}
		fw.IPv6 = v6
	}
	rules, err := fw.Rules()
	if err != nil {
		return nil, err
	}
	for i := range rules {
		if rules[i].Program == Ip6tablesPath {
			rules[i].Program = ip6tables
		}
	}
	return rules, nil
}

// ApplyMetadataFirewall adds the MetadataRules that are missing and
// returns those it added.
func ApplyMetadataFirewall(ctx context.Context, h Host, fw MetadataFirewall, ip6tables, ifInet6 string) ([]Rule, error) {
	rules, err := MetadataRules(fw, ip6tables, ifInet6)
	if err != nil {
		return nil, err
	}
	return EnsureRules(ctx, h, rules)
}

// RemoveMetadataFirewall removes fw's rules, the IPv6 one too where
// ip6tables exists.
func RemoveMetadataFirewall(ctx context.Context, h Host, fw MetadataFirewall, ip6tables string) error {
	if _, err := os.Stat(ip6tables); err == nil && fw.Google() {
		fw.IPv6 = true
	}
	rules, err := fw.Rules()
	if err != nil {
		return err
	}
	for i := range rules {
		if rules[i].Program == Ip6tablesPath {
			rules[i].Program = ip6tables
		}
	}
	return RemoveRules(ctx, h, rules)
}

func (b *booter) firewall(ctx context.Context) error {
	fw := MetadataFirewall{Host: metadataHostPort(b.o.MetadataHost)}
	added, err := ApplyMetadataFirewall(ctx, b.o.Host, fw, b.o.Ip6tables, b.o.IfInet6)
	if err != nil {
		return stepErr(event.BootstrapStepFirewall, "%w", err)
	}
	if len(added) > 0 {
		b.did("metadata server restricted to root")
	}
	return nil
}

// EnsureRules inserts each rule into its program's OUTPUT chain unless
// -C finds it there, and returns those it inserted.
func EnsureRules(ctx context.Context, h Host, rules []Rule) ([]Rule, error) {
	var added []Rule
	for _, r := range rules {
		ok, err := ensureRule(ctx, h, r.Program, r.Args)
		if err != nil {
			return added, err
		}
		if ok {
			added = append(added, r)
		}
	}
	return added, nil
}

// RemoveRules deletes every copy of each rule.
func RemoveRules(ctx context.Context, h Host, rules []Rule) error {
	var errs []error
	for _, r := range rules {
		errs = append(errs, removeRule(ctx, h, r.Program, r.Args))
	}
	return errors.Join(errs...)
}

// EnsureFirewall inserts rule into iptables' OUTPUT chain unless
// iptables -C finds it there; it reports whether it inserted it.
func EnsureFirewall(ctx context.Context, h Host, rule []string) (bool, error) {
	return ensureRule(ctx, h, IptablesPath, rule)
}

func ensureRule(ctx context.Context, h Host, prog string, rule []string) (bool, error) {
	name := prog[strings.LastIndexByte(prog, '/')+1:]
	st, out, err := h.Run(ctx, prog, append([]string{"-w", "-C", "OUTPUT"}, rule...)...)
	if err != nil {
		return false, fmt.Errorf("%s -C: %w", name, err)
	}
	if st == 0 {
		return false, nil
	}
	if st != 1 {
		return false, fmt.Errorf("%s -C exited %d: %s", name, st, bytes.TrimSpace(out))
	}
	if st, out, err = h.Run(ctx, prog, append([]string{"-w", "-I", "OUTPUT"}, rule...)...); err != nil || st != 0 {
		return false, fmt.Errorf("%s -I exited %d: %s%v", name, st, bytes.TrimSpace(out), errOrEmpty(err))
	}
	return true, nil
}

// RemoveFirewall deletes every copy of rule from iptables' OUTPUT chain
// (the local system, when a simulated VM stops).
func RemoveFirewall(ctx context.Context, h Host, rule []string) error {
	return removeRule(ctx, h, IptablesPath, rule)
}

func removeRule(ctx context.Context, h Host, prog string, rule []string) error {
	name := prog[strings.LastIndexByte(prog, '/')+1:]
	for range 10 {
		st, out, err := h.Run(ctx, prog, append([]string{"-w", "-D", "OUTPUT"}, rule...)...)
		if err != nil {
			return fmt.Errorf("%s -D: %w", name, err)
		}
		if st == 1 {
			return nil // no (more) such rule
		}
		if st != 0 {
			return fmt.Errorf("%s -D exited %d: %s", name, st, bytes.TrimSpace(out))
		}
	}
	return nil
}

// RemoveFirewallFor removes every copy of the rule FirewallRule gives for
// addr, with a 10-second bound: the rule of a metadata server that ends,
// or a stale one for a port a caller has just bound (left by a process
// killed before removing its own, it would refuse every non-root client
// of the new server). Where this process cannot run iptables (not root),
// it does nothing: neither can it have added a rule.
func RemoveFirewallFor(ctx context.Context, addr string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	rule, err := FirewallRule(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := RemoveFirewall(ctx, OSHost{}, rule); err != nil {
		return fmt.Errorf("removing the rule for %s: %w", addr, err)
	}
	return nil
}
