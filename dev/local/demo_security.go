package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/slurm"
	"github.com/flexslurm/flexslurm/shared/slurmstate"
)

// probeScript is a job that tries to become root of the cluster: read the
// munge key, and fetch the node service account's token from the VM's
// metadata server at addr. It prints key=READ|DENIED and token=GOT when it
// got a token, token=REFUSED when the connection was refused (curl exit 7:
// the bootstrap's firewall rule rejects it), or token=ERR<curl exit code>
// otherwise (e.g. 28, a timeout on a loaded machine), so that a slow
// metadata server is never mistaken for a refusal.
func probeScript(addr string) string {
	return "if /usr/bin/cat /etc/munge/munge.key >/dev/null 2>&1; then k=READ; else k=DENIED; fi; " +
		"/usr/bin/curl -sf -m 60 -o /dev/null -H 'Metadata-Flavor: Google' " +
		"http://" + addr + "/computeMetadata/v1/instance/service-accounts/default/token; rc=$?; " +
		"case $rc in 0) t=GOT;; 7) t=REFUSED;; *) t=ERR$rc;; esac; " +
		"echo key=$k token=$t"
}

// probeScriptNoCurl is probeScript for a Slurm whose nodes lack curl (the
// 24.11 chroot): bash's /dev/tcp sends the same request; a connection
// the firewall rule rejects (tcp-reset) fails with "Connection refused".
func probeScriptNoCurl(addr string) string {
	host, port, _ := strings.Cut(addr, ":")
	return "if /usr/bin/cat /etc/munge/munge.key >/dev/null 2>&1; then k=READ; else k=DENIED; fi; " +
		"e=$(/usr/bin/timeout 60 /usr/bin/bash -c 'exec 3<>/dev/tcp/" + host + "/" + port + " && " +
		"printf \"GET /computeMetadata/v1/instance/service-accounts/default/token HTTP/1.0\\r\\nMetadata-Flavor: Google\\r\\n\\r\\n\" >&3 && " +
		"/usr/bin/head -1 <&3' 2>&1); rc=$?; " +
		"case \"$e\" in *\" 200 \"*) t=GOT;; *\"Connection refused\"*) t=REFUSED;; *) t=ERR$rc;; esac; " +
		"echo key=$k token=$t"
}

// demoNoRootJobs submits, to node (up, booted by `flexslurm node boot`), a
// job as the unprivileged user nobody and the same job as root: nobody
// must read neither the munge key nor the node service account's token,
// root must get both (so the check can fail). It returns whether both
// hold.
func (s *System) demoNoRootJobs(ctx context.Context, ss *slurmSide, node, part string, wait time.Duration) bool {
	outDir := ss.lc.HookLogDir() // mode 1777: nobody writes its output there
	submit := func(user, script string) (string, error) {
		args := []string{"--parsable", "-p", part, "-N", "1", "-w", node, "--time", "5", "-J", "probe-" + user,
			"--chdir", "/tmp", "-o", filepath.Join(outDir, "probe-%j.out"), "--wrap", script}
		argv := append([]string{"/usr/bin/sbatch"}, args...)
		if user != "root" {
			argv = append([]string{"/usr/sbin/runuser", "-u", user, "--"}, argv...)
		}
		if inst := ss.lc.Inst; inst.Chrooted() {
			// The release's own sbatch, as the user inside the chroot.
			argv = append([]string{"/usr/sbin/chroot", inst.Root}, argv...)
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		cmd.Dir = "/tmp"
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("sbatch as %s: %w: %s", user, err, strings.TrimSpace(string(out)))
		}
		id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
		return id, nil
	}
	// vmNow is the node's VM and the address of its metadata server.
	vmNow := func() (string, string) {
		ss.mu.Lock()
		vm := ss.vms[node]
		ss.mu.Unlock()
		return vm, ss.g.metadataAddr(vm)
	}
	// probe runs the job once as user against the metadata server of the
	// node's VM at submission. It reports whether that VM still served the
	// node when the job ended: the clock runs fast, and a static node's
	// VM can reach its max run duration while the job waits or runs. A
	// probe of a VM that went away proves nothing (a closed server also
	// refuses a connection).
	probe := func(user string) (out string, sameVM bool) {
		vm, addr := vmNow()
		if addr == "" {
			ss.tl.Say(fmt.Sprintf("VM %s of %s has no metadata server", vm, node))
			return "", false
		}
		script := probeScript(addr)
		if ss.lc.Inst.Chrooted() {
			script = probeScriptNoCurl(addr)
		}
		id, err := submit(user, script)
		if err != nil {
			ss.tl.Say(err.Error())
			return "", true
		}
		var jl slurm.JobInfo
		completed := s.waitFor(ctx, wait, ss.jobIs(ctx, id, &jl, func(j slurm.JobInfo) bool { return j.State == slurmstate.JobCompleted }))
		if vm2, addr2 := vmNow(); vm2 != vm || addr2 != addr {
			ss.tl.Say(fmt.Sprintf("%s's VM %s went away while job %s of %s probed it: probing its next VM", node, vm, id, user))
			ss.scancel(ctx, id)
			return "", false
		}
		if !completed {
			ss.tl.Say(fmt.Sprintf("job %s of %s did not complete (%s)", id, user, jl.State))
			return "", true
		}
		b, _ := os.ReadFile(filepath.Join(outDir, "probe-"+id+".out"))
		return strings.TrimSpace(string(b)), true
	}
	result := func(user string) string {
		var out string
		for range 3 {
			var same bool
			if out, same = probe(user); same {
				return out
			}
			// Wait for the next VM to serve the node.
			s.waitFor(ctx, wait, func() bool { vm, addr := vmNow(); return vm != "" && addr != "" })
		}
		return out
	}
	nobody := result("nobody")
	root := result("root")
	ok := s.TL.Check(nobody == "key=DENIED token=REFUSED", fmt.Sprintf("a job of nobody on %s reads neither the munge key nor the node service account's token (%q)", node, nobody))
	return s.TL.Check(root == "key=READ token=GOT", fmt.Sprintf("the same job as root on %s reads both (%q): the check can fail", node, root)) && ok
}
