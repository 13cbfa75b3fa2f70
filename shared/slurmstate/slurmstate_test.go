package slurmstate

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseNode(t *testing.T) {
	const name = "flexvm-a3u-1"
	tests := []struct {
		about  string
		words  []string
		reason string
		want   Node
	}{
		{"scontrol show node: State=IDLE+CLOUD+POWERED_DOWN", []string{"IDLE", "CLOUD", "POWERED_DOWN"}, "",
			Node{State: NodeIdle, Flags: NodeFlags{FlagCloud, FlagPoweredDown}}},
		{"22.05 sinfo --json: state and state_flags", []string{"idle", "DRAIN", "CLOUD"}, "flexslurm: health check failed",
			Node{State: NodeIdle, Flags: NodeFlags{FlagCloud, FlagDrain}, Reason: "flexslurm: health check failed", Owner: OwnerFlexslurm, ReasonHealth: true}},
		{"24.11 sinfo --json: one list, flags in any order", []string{"MIXED", "NOT_RESPONDING", "DRAIN", "CLOUD"}, "bad dimm",
			Node{State: NodeMixed, Flags: NodeFlags{FlagCloud, FlagDrain, FlagNotResponding}, Reason: "bad dimm", Owner: OwnerOther}},
		{"duplicates and case folded", []string{"down", "cloud", "CLOUD", "Powered_Down"}, "",
			Node{State: NodeDown, Flags: NodeFlags{FlagCloud, FlagPoweredDown}}},
		{"sinfo compact suffixes dropped", []string{"idle~"}, "", Node{State: NodeIdle}},
		{"sinfo's drained is idle and DRAIN", []string{"drained"}, "", Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}}},
		{"sinfo's draining is allocated and DRAIN", []string{"draining"}, "", Node{State: NodeAllocated, Flags: NodeFlags{FlagDrain}}},
		{"sinfo's drng", []string{"drng"}, "", Node{State: NodeAllocated, Flags: NodeFlags{FlagDrain}}},
		{"sinfo's comp", []string{"comp"}, "", Node{State: NodeIdle, Flags: NodeFlags{FlagCompleting}}},
		{"sinfo's alloc and mix", []string{"alloc"}, "", Node{State: NodeAllocated}},
		{"no base state: unknown", []string{"CLOUD"}, "", Node{State: NodeUnknown, Flags: NodeFlags{FlagCloud}}},
		{"nothing at all", nil, "", Node{State: NodeUnknown}},
		{"the first base state counts", []string{"IDLE", "DOWN"}, "", Node{State: NodeIdle}},
		{"unknown flags are kept", []string{"IDLE", "PLANNED"}, "", Node{State: NodeIdle, Flags: NodeFlags{"PLANNED"}}},
		{"flexslurm's reason names the node's VM", []string{"IDLE", "DRAIN"}, "flexslurm: GPU lost (flexvm-a3u-1-g3)",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "flexslurm: GPU lost (flexvm-a3u-1-g3)", Owner: OwnerFlexslurm, ReasonGeneration: 3}},
		{"the hooks' reason names it after 'on'", []string{"IDLE", "DRAIN"}, "flexslurm: health check failed on flexvm-a3u-1-g12: Xid 79",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "flexslurm: health check failed on flexvm-a3u-1-g12: Xid 79",
				Owner: OwnerFlexslurm, ReasonGeneration: 12, ReasonHealth: true}},
		{"the Repair function's drain is a health check's", []string{"IDLE", "DRAIN"}, "flexslurm: health check failed: GPU 2: Xid 79 (flexvm-a3u-1-g5)",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "flexslurm: health check failed: GPU 2: Xid 79 (flexvm-a3u-1-g5)",
				Owner: OwnerFlexslurm, ReasonGeneration: 5, ReasonHealth: true}},
		{"a diagnosis drain is not a failed check's", []string{"IDLE", "DRAIN"}, "flexslurm: health check inconclusive 2 times within 24h: drained for diagnosis (flexvm-a3u-1-g5)",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "flexslurm: health check inconclusive 2 times within 24h: drained for diagnosis (flexvm-a3u-1-g5)",
				Owner: OwnerFlexslurm, ReasonGeneration: 5}},
		{"someone else's words about a failed check are not flexslurm's", []string{"IDLE", "DRAIN"}, "health check failed on flexvm-a3u-1-g5",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "health check failed on flexvm-a3u-1-g5", Owner: OwnerOther}},
		{"a VM its MIG named from the base names its generation", []string{"IDLE", "DRAIN"}, "flexslurm: health check failed on flexvm-a3u-1-g12-x7k2: Xid 79",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "flexslurm: health check failed on flexvm-a3u-1-g12-x7k2: Xid 79",
				Owner: OwnerFlexslurm, ReasonGeneration: 12, ReasonHealth: true}},
		{"a longer suffix is another name", []string{"IDLE", "DRAIN"}, "flexslurm: replaced (flexvm-a3u-1-g12-x7k2a)",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "flexslurm: replaced (flexvm-a3u-1-g12-x7k2a)", Owner: OwnerFlexslurm}},
		{"another node's VM is not this node's", []string{"IDLE", "DRAIN"}, "flexslurm: replaced by flexvm-a3u-10 (flexvm-a3u-10-g2)",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "flexslurm: replaced by flexvm-a3u-10 (flexvm-a3u-10-g2)", Owner: OwnerFlexslurm}},
		{"end of life names the successor node, then the VM", []string{"IDLE", "DRAIN"},
			"flexslurm: end of life at 2026-12-01T00:00:00Z, replaced by flexvm-a3u-2 (flexvm-a3u-1-g4)",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "flexslurm: end of life at 2026-12-01T00:00:00Z, replaced by flexvm-a3u-2 (flexvm-a3u-1-g4)",
				Owner: OwnerFlexslurm, ReasonGeneration: 4}},
		{"someone else's reason naming the VM has no generation", []string{"IDLE", "DRAIN"}, "drained flexvm-a3u-1-g3 by hand",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "drained flexvm-a3u-1-g3 by hand", Owner: OwnerOther}},
		{"the prefix alone, without the space, is not flexslurm's", []string{"IDLE", "DRAIN"}, "flexslurm",
			Node{State: NodeIdle, Flags: NodeFlags{FlagDrain}, Reason: "flexslurm", Owner: OwnerOther}},
	}
	for _, tc := range tests {
		t.Run(tc.about, func(t *testing.T) {
			got := ParseNode(name, tc.words, tc.reason)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseNode(%q, %q) (-want +got):\n%s", tc.words, tc.reason, diff)
			}
			// Its words parse back to the same facts: a snapshot or a
			// stored view carries them.
			if again := ParseNode(name, got.Words(), got.Reason); !cmp.Equal(got, again) {
				t.Errorf("parsed again from %q: %+v, want %+v", got.Words(), again, got)
			}
		})
	}
}

func TestNodePredicates(t *testing.T) {
	type preds struct{ DrainSet, Drained, Draining, Busy, Down, PoweredOff, Ready, ForeignDrain bool }
	tests := []struct {
		state  string // as scontrol prints it
		reason string
		want   preds
	}{
		{"IDLE+CLOUD", "", preds{Ready: true}},
		{"IDLE+CLOUD+DRAIN", "flexslurm: x", preds{DrainSet: true, Drained: true, Ready: true}},
		{"IDLE+CLOUD+DRAIN", "bad dimm", preds{DrainSet: true, Drained: true, Ready: true, ForeignDrain: true}},
		{"MIXED+DRAIN", "bad dimm", preds{DrainSet: true, Draining: true, Busy: true, Ready: true, ForeignDrain: true}},
		{"ALLOCATED+CLOUD+DRAIN", "", preds{DrainSet: true, Draining: true, Busy: true, Ready: true}},
		{"IDLE+DRAIN+COMPLETING", "", preds{DrainSet: true, Draining: true, Busy: true, Ready: true}},
		{"DOWN+CLOUD+DRAIN+NOT_RESPONDING", "", preds{DrainSet: true, Drained: true, Down: true}},
		{"IDLE+CLOUD+DRAIN+POWERED_DOWN", "", preds{DrainSet: true, Drained: true, PoweredOff: true}},
		{"DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING", "ResumeTimeout reached", preds{Down: true, PoweredOff: true}},
		{"IDLE+CLOUD+POWERING_DOWN", "", preds{PoweredOff: true}},
		{"ALLOCATED+CLOUD+POWER_DOWN", "", preds{Busy: true, PoweredOff: true}},
		{"IDLE+CLOUD+NOT_RESPONDING+POWERING_UP", "", preds{}},
		{"FUTURE", "", preds{}},
	}
	for _, tc := range tests {
		n := ParseNode("n", splitPlus(tc.state), tc.reason)
		got := preds{n.DrainSet(), n.Drained(), n.Draining(), n.Busy(), n.Down(), n.PoweredOff(), n.Ready(), n.ForeignDrain()}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %q (-want +got):\n%s", tc.state, tc.reason, diff)
		}
	}
	if got := ParseNode("n", []string{"idle", "POWERED_DOWN", "CLOUD"}, "").String(); got != "IDLE+CLOUD+POWERED_DOWN" {
		t.Errorf("String() = %s, want IDLE+CLOUD+POWERED_DOWN", got)
	}
}

func splitPlus(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '+' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func TestOwnReasonFor(t *testing.T) {
	n := ParseNode("c-a-0", []string{"IDLE", "DRAIN"}, "flexslurm: GPU lost (c-a-0-g2)")
	for gen, want := range map[int64]bool{1: false, 2: false, 3: true, 9: true} {
		if got := n.OwnReasonFor(gen); got != want {
			t.Errorf("drain for generation 2, OwnReasonFor(%d) = %v, want %v", gen, got, want)
		}
	}
	for _, reason := range []string{"GPU lost (c-a-0-g2)", "flexslurm: GPU lost", ""} {
		if ParseNode("c-a-0", []string{"IDLE", "DRAIN"}, reason).OwnReasonFor(3) {
			t.Errorf("reason %q: lifted, want left alone", reason)
		}
	}
}

func TestOwnHealthDrainOf(t *testing.T) {
	hook := "flexslurm: health check failed on c-a-0-g2: GPU 1: Xid 79"
	for _, tc := range []struct {
		words  []string
		reason string
		gen    int64
		want   bool
	}{
		{[]string{"IDLE", "DRAIN"}, hook, 2, true},
		{[]string{"ALLOCATED", "DRAIN"}, hook, 2, true}, // draining: the job still ends there
		{[]string{"IDLE", "DRAIN"}, hook, 3, false},     // an earlier VM's: OwnReasonFor lifts it
		{[]string{"IDLE", "DRAIN"}, hook, 1, false},
		{[]string{"IDLE"}, hook, 2, false}, // the drain was lifted; the reason lingers
		{[]string{"IDLE", "DRAIN"}, "flexslurm: end of life at 2026-12-01T00:00:00Z, replaced by c-a-2 (c-a-0-g2)", 2, false},
		{[]string{"IDLE", "DRAIN"}, "flexslurm: health check inconclusive 2 times within 24h: drained for diagnosis (c-a-0-g2)", 2, false},
		{[]string{"IDLE", "DRAIN"}, "health check failed on c-a-0-g2: GPU 1", 2, false},
		{[]string{"IDLE", "DRAIN"}, "flexslurm: health check failed: GPU 1", 2, false}, // names no VM
		{[]string{"IDLE", "DRAIN"}, "flexslurm: health check failed: GPU 1", 0, false},
	} {
		if got := ParseNode("c-a-0", tc.words, tc.reason).OwnHealthDrainOf(tc.gen); got != tc.want {
			t.Errorf("%v %q: OwnHealthDrainOf(%d) = %v, want %v", tc.words, tc.reason, tc.gen, got, tc.want)
		}
	}
}

func TestNodeFlagsSet(t *testing.T) {
	s := NewNodeFlags(FlagPoweredDown, FlagCloud, FlagCloud)
	if diff := cmp.Diff(NodeFlags{FlagCloud, FlagPoweredDown}, s); diff != "" {
		t.Errorf("NewNodeFlags (-want +got):\n%s", diff)
	}
	if !s.Has(FlagCloud) || s.Has(FlagDrain) {
		t.Errorf("Has on %v", s)
	}
	with := s.With(FlagDrain)
	if diff := cmp.Diff(NodeFlags{FlagCloud, FlagDrain, FlagPoweredDown}, with); diff != "" {
		t.Errorf("With (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(NodeFlags{FlagCloud}, with.Without(FlagDrain, FlagPoweredDown)); diff != "" {
		t.Errorf("Without (-want +got):\n%s", diff)
	}
	if s.Has(FlagDrain) || len(s) != 2 {
		t.Errorf("With changed its receiver: %v", s)
	}
	if NewNodeFlags() != nil || NodeFlags(nil).Without(FlagCloud) != nil {
		t.Error("the empty set is not nil")
	}
}

func TestJobState(t *testing.T) {
	type preds struct{ Pending, Unstarted, Waiting, Running, OnNodes, Alive, Finished bool }
	tests := []struct {
		words []string
		want  JobState
		flags []string
		preds preds
	}{
		{[]string{"PENDING"}, JobPending, nil, preds{Pending: true, Unstarted: true, Waiting: true, Alive: true}},
		{[]string{"pending", "REQUEUED"}, JobPending, []string{"REQUEUED"}, preds{Pending: true, Unstarted: true, Waiting: true, Alive: true}},
		{[]string{"CONFIGURING"}, JobConfiguring, nil, preds{Unstarted: true, Alive: true}},
		{[]string{"RUNNING", "CONFIGURING"}, JobRunning, []string{"CONFIGURING"}, preds{Running: true, OnNodes: true, Alive: true}},
		{[]string{"COMPLETING"}, JobCompleting, nil, preds{OnNodes: true, Alive: true}},
		{[]string{"REQUEUED"}, JobRequeued, nil, preds{Waiting: true, Alive: true}},
		{[]string{"REQUEUE_HOLD"}, JobRequeueHold, nil, preds{Waiting: true, Alive: true}},
		{[]string{"COMPLETED"}, JobCompleted, nil, preds{Finished: true}},
		{[]string{"NODE_FAIL", "REQUEUED"}, JobNodeFail, []string{"REQUEUED"}, preds{Finished: true}},
		{nil, "", nil, preds{}},
	}
	for _, tc := range tests {
		s, flags := ParseJobState(tc.words)
		if s != tc.want || !cmp.Equal(flags, tc.flags) {
			t.Errorf("ParseJobState(%q) = %s, %q; want %s, %q", tc.words, s, flags, tc.want, tc.flags)
		}
		got := preds{s.Pending(), s.Unstarted(), s.Waiting(), s.Running(), s.OnNodes(), s.Alive(), s.Finished()}
		if diff := cmp.Diff(tc.preds, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s, diff)
		}
	}
}

// parseNodeBefore is ParseNode as it was written first, upper- and
// lower-casing every word: the reference TestParseNodeMatchesBefore
// holds the faster one to.
func parseNodeBefore(name string, words []string, reason string) Node {
	var n Node
	var flags []NodeFlag
	for _, w := range words {
		w = strings.ToUpper(strings.TrimRight(strings.TrimSpace(w), "*~#%!$@^-"))
		if w == "" {
			continue
		}
		if b := NodeBase(strings.ToLower(w)); slices.Contains(NodeBases, b) {
			if n.State == "" {
				n.State = b
			}
			continue
		}
		if c, ok := sinfoWords[w]; ok {
			if n.State == "" && c.base != "" {
				n.State = c.base
			}
			flags = append(flags, c.flags...)
			continue
		}
		flags = append(flags, NodeFlag(w))
	}
	if n.State == "" {
		n.State = NodeUnknown
	}
	n.Flags = NewNodeFlags(flags...)
	n.Reason = reason
	n.Owner, n.ReasonGeneration = parseReason(name, reason)
	return n
}

// TestParseNodeMatchesBefore: ParseNode gives what parseNodeBefore gives
// for random lists of state words in any case, with sinfo's suffixes,
// compound words, duplicates, white space and non-ASCII letters (the
// Kelvin sign and the long s fold to ASCII letters).
func TestParseNodeMatchesBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pool := []string{"idle", "IDLE", "Idle", "idle~", "alloc", "ALLOCATED", "mixed", "MIX", "down*", "DOWN", "error", "future", "unknown",
		"drained", "DRAINING", "drng", "comp", "COMPLETING", "CLOUD", "cloud", "POWERED_DOWN", "powering_up", "DRAIN", "NOT_RESPONDING",
		"", " ", " idle ", "#", "x", "unkno\u212An", "\u017Fomething", "\u00e9tat", "MAINT", "reserved", "power_down", "POWER_UP"}
	for range 20000 {
		words := make([]string, rng.IntN(6))
		for i := range words {
			words[i] = pool[rng.IntN(len(pool))]
		}
		want := parseNodeBefore("c-p-1", words, "flexslurm: x (c-p-1-g2)")
		got := ParseNode("c-p-1", words, "flexslurm: x (c-p-1-g2)")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("ParseNode(%q) (-before +now):\n%s", words, diff)
		}
	}
}
