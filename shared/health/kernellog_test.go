package health

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseKernelLogFormats(t *testing.T) {
	log := `[    4.915520] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024
[ 8641.554023] NVRM: Xid (PCI:0000:8a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[Sat Nov 30 03:08:57 2026] NVRM: Xid (0000:03:00): 14, Channel 00000001
Nov 30 03:08:57 node kernel: NVRM: Xid (PCI:0008:06:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 04 (0x00000004 0x80000000 0x0 0x0 0x0 0x0 0x0)
[ 8641.554031] NVRM: GPU 0000:8a:00.0: GPU has fallen off the bus.
[ 8641.600000] NVRM: GPU 0000:8b:00.0: RmInitAdapter failed! (0x26:0x56:1474) GPU is lost
[ 8641.700000] xhci_hcd 0000:00:14.0: GPU is lost? (not an NVRM line)
`
	got, err := parseKernelLog([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []kernelEvent{
		{Kind: eventXid, Xid: 79, PCI: "0000:8a:00", Message: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", Line: 2},
		{Kind: eventXid, Xid: 14, PCI: "0000:03:00", Message: "Channel 00000001", Line: 3},
		{Kind: eventXid, Xid: 145, PCI: "0008:06:00", Message: "RLW_REMAP Nonfatal XC0 i0 Link 04 (0x00000004 0x80000000 0x0 0x0 0x0 0x0 0x0)", Line: 4},
		{Kind: eventOffTheBus, PCI: "0000:8a:00.0", Message: "NVRM: GPU 0000:8a:00.0: GPU has fallen off the bus.", Line: 5},
		{Kind: eventGPULost, PCI: "0000:8b:00.0", Message: "NVRM: GPU 0000:8b:00.0: RmInitAdapter failed! (0x26:0x56:1474) GPU is lost", Line: 6},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if _, err := parseKernelLog(make([]byte, MaxOutputBytes+1)); err == nil {
		t.Error("input above MaxOutputBytes was accepted")
	}
}

func TestJudgeKernelLog(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want findings
	}{
		{name: "no NVRM events", log: "[    1.000000] Linux version 6.8.0\n"},
		{
			name: "Xid 79",
			log:  "[86412.554023] NVRM: Xid (PCI:0000:8a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n",
			want: findings{fail: []string{"Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS) on PCI 0000:8a:00, 1 time: hardware or driver failure: pid='<unknown>', name=<unknown>, GPU has fallen off the bus."}},
		},
		{
			name: "Xid 48 repeated",
			log: "[1.0] NVRM: Xid (PCI:0000:04:00): 48, pid=1, DBE (0x1) has been detected on GPU in the framebuffer at partition 2, subpartition 0.\n" +
				"[2.0] NVRM: Xid (PCI:0000:04:00): 48, pid=1, DBE (0x1) has been detected on GPU in the framebuffer at partition 2, subpartition 1.\n",
			want: findings{fail: []string{"Xid 48 (ROBUST_CHANNEL_GPU_ECC_DBE) on PCI 0000:04:00, 2 times: hardware or driver failure: pid=1, DBE (0x1) has been detected on GPU in the framebuffer at partition 2, subpartition 0."}},
		},
		{
			name: "benign Xid 13 and 31",
			log: "[1.0] NVRM: Xid (PCI:0000:0a:00): 13, pid=48213, name=python3, Graphics Exception: ESR 0x514730=0x201000e\n" +
				"[2.0] NVRM: Xid (PCI:0000:0a:00): 31, pid=48213, name=python3, Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_1b000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n",
			want: findings{warn: []string{
				"Xid 13 (ROBUST_CHANNEL_GR_EXCEPTION) on PCI 0000:0a:00, 1 time: application error or informational event, not a hardware fault: pid=48213, name=python3, Graphics Exception: ESR 0x514730=0x201000e",
				"Xid 31 (ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT) on PCI 0000:0a:00, 1 time: application error or informational event, not a hardware fault: pid=48213, name=python3, Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_1b000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
			}},
		},
		{
			name: "unknown Xid is a warning",
			log:  "[1.0] NVRM: Xid (PCI:0000:0a:00): 999, something new\n",
			want: findings{warn: []string{"Xid 999 on PCI 0000:0a:00, 1 time: not in this check's Xid table: something new"}},
		},
		{
			name: "Xid 155 is inconclusive",
			log:  "[1.0] NVRM: Xid (PCI:0000:0a:00): 155, NVLINK_SW_DEFINED Link 03 down to sleep\n",
			want: findings{inconclusive: []string{"Xid 155 (NVLINK_SW_DEFINED_ERROR) on PCI 0000:0a:00, 1 time: the GPU needs a reset, but this Xid is not evidence of a hardware fault: NVLINK_SW_DEFINED Link 03 down to sleep"}},
		},
		{
			name: "NVLink5 fatal and non-fatal",
			log: "[1.0] NVRM: Xid (PCI:0008:06:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 04 (0x00000006 0x00000008 0x0 0x0 0x0 0x0 0x0)\n" +
				"[2.0] NVRM: Xid (PCI:0008:06:00): 145, RLW_TAGSTATE Fatal XC0 i0 Link 04 (0x00000008 0x00000002 0x0 0x0 0x0 0x0 0x0)\n",
			want: findings{
				fail: []string{"Xid 145 (NVLINK_RLW_ERROR) on PCI 0008:06:00, 1 time: hardware or driver failure: RLW_TAGSTATE Fatal XC0 i0 Link 04 (0x00000008 0x00000002 0x0 0x0 0x0 0x0 0x0)"},
				warn: []string{"Xid 145 (NVLINK_RLW_ERROR) on PCI 0008:06:00, 1 time: application error or informational event, not a hardware fault: RLW_RXPIPE Nonfatal XC0 i0 Link 04 (0x00000006 0x00000008 0x0 0x0 0x0 0x0 0x0)"},
			},
		},
		{
			name: "Xid 154: the latest action counts",
			log: "[1.0] NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)\n" +
				"[2.0] NVRM: Xid (PCI:0000:05:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)\n" +
				"[3.0] NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)\n",
			want: findings{
				fail: []string{`Xid 154 (GPU_RECOVERY_ACTION_CHANGED) on PCI 0000:05:00: latest recovery action "Node Reboot Required": GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)`},
				warn: []string{`Xid 154 (GPU_RECOVERY_ACTION_CHANGED) on PCI 0000:04:00: latest recovery action "None"`},
			},
		},
		{
			name: "fallen off the bus without an Xid",
			log:  "[1.0] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n[1.1] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n",
			want: findings{fail: []string{"GPU at PCI 0000:01:00.0 has fallen off the bus, 2 times: NVRM: GPU at 0000:01:00.0 has fallen off the bus."}},
		},
		{
			name: "GPU is lost",
			log:  "[1.0] NVRM: GPU 0000:8b:00.0: GPU is lost\n",
			want: findings{fail: []string{"GPU at PCI 0000:8b:00.0 is lost, 1 time: NVRM: GPU 0000:8b:00.0: GPU is lost"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judgeKernelLog(Output{Stdout: []byte(tt.log)}, Options{})
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(findings{}), cmpEmptyNil); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestXidTable pins the classification of the Xids the issue names and the
// structure of the table.
func TestXidTable(t *testing.T) {
	for _, code := range []int{46, 48, 62, 64, 74, 79, 94, 95, 109, 119, 120, 136, 140, 143, 149} {
		if c := xidTable[code].class; c != xidFail {
			t.Errorf("Xid %d class %d, want FAIL", code, c)
		}
	}
	for _, code := range []int{13, 31, 43, 45, 63, 92} {
		if info, ok := xidTable[code]; !ok || info.class != xidWarn {
			t.Errorf("Xid %d = %+v, want a warning", code, info)
		}
	}
	for code, info := range xidTable {
		if info.mnemonic == "" {
			t.Errorf("Xid %d has no mnemonic", code)
		}
	}
	for action, fails := range map[string]bool{"None": false, "Drain P2P": false, "Drain and Reset": true, "GPU Reset Required": true, "Node Reboot Required": true} {
		if got := recoveryActionFails(action); got != fails {
			t.Errorf("recoveryActionFails(%q) = %v, want %v", action, got, fails)
		}
	}
}

// TestAttackKernelLogForgedByUser: a user's job writes text of its choosing
// into the kernel log without any privilege — the name of the file a
// crashing process ran from ends its segfault line (up to 255 bytes, and a
// newline in it starts an indented line of its own in dmesg's output),
// and its process name (up to 15 bytes) begins one. A health check that
// read a GPU failure anywhere in such a line would fail the node: Slurm
// drains it and the repair replaces its VM, as often as the user likes.
// Only the driver's own lines count: "NVRM: " right after the line's
// prefix, with the driver's head (a PCI address) after it.
func TestAttackKernelLogForgedByUser(t *testing.T) {
	const regs = "segfault at 0 ip 00005555deadbeef sp 00007ffc12345678 error 4 in "
	for name, line := range map[string]string{
		"Xid in a segfault's file name":         "[ 8641.554023] a.out[4242]: " + regs + "NVRM: Xid (PCI:0000:8a:00): 79, pid=1, GPU has fallen off the bus.[5555de000000+1000] likely on CPU 3 (core 3, socket 0)",
		"off the bus in a segfault's file name": "[ 8641.554023] a.out[4242]: " + regs + "NVRM: GPU 0000:8a:00.0: GPU has fallen off the bus.[5555de000000+1000]",
		"GPU lost in a segfault's file name":    "[ 8641.554023] a.out[4242]: " + regs + "NVRM: GPU 0000:8b:00.0: GPU is lost[5555de000000+1000]",
		"process name NVRM, file name the rest": "[ 8641.554023] NVRM: x[4242]: " + regs + "GPU has fallen off the bus[5555de000000+1000]",
		"process name NVRM: Xid (":              "[ 8641.554023] NVRM: Xid ([4242]: " + regs + "x): 79, GPU has fallen off the bus[5555de000000+1000]",
		"process name NVRM: Xid (): 7":          "[ 8641.554023] NVRM: Xid (): 7 (4242): Using mlock ulimits for SHM_HUGETLB is deprecated",
		"a newline in the file name":            "[ 8641.554023] a.out[4242]: " + regs + "x\n               NVRM: Xid (PCI:0000:8a:00): 79, GPU has fallen off the bus.[5555de000000+1000]",
		"journalctl, process name NVRM":         "[ 8641.554023] node-1 kernel: NVRM: x[4242]: " + regs + "GPU has fallen off the bus[5555de000000+1000]",
		"process name ending kernel: NVRM: ":    "[86412.554023] kernel: NVRM: [4242]: " + regs + "NVRM: GPU 0000:8a:00.0: GPU has fallen off the bus.[5555de000000+1000]",
	} {
		events, err := parseKernelLog([]byte(line + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(events) != 0 {
			t.Errorf("%s: the user's text was read as the driver's: %+v", name, events)
		}
		if f := judgeKernelLog(Output{Stdout: []byte(line + "\n")}, Options{}); len(f.fail) != 0 || len(f.inconclusive) != 0 {
			t.Errorf("%s: the user's text fails the node: %+v", name, f)
		}
	}
	// The driver's own lines, in each output format, still count.
	for _, line := range []string{
		"[ 8641.554023] NVRM: Xid (PCI:0000:8a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"[ 8641.554023] node-1 kernel: NVRM: Xid (PCI:0000:8a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"Nov 30 03:08:57 node-1 kernel: [ 8641.554023] NVRM: Xid (PCI:0000:8a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
		"[ 8641.554031] NVRM: GPU 0000:8a:00.0: GPU has fallen off the bus.",
		"[ 8641.554031] NVRM: GPU at PCI:0000:8a:00: GPU has fallen off the bus.",
	} {
		if f := judgeKernelLog(Output{Stdout: []byte(line + "\n")}, Options{}); len(f.fail) == 0 {
			t.Errorf("the driver's line %q does not fail the node", line)
		}
	}
}
