package health

import "strings"

// The Xid table. Source: NVIDIA, "Analyzing Xid Errors with the Xid
// Catalog" (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html
// and its spreadsheet Xid-Catalog.xlsx, Ampere and newer GPUs), whose
// "Resolution Bucket (Immediate Action)" column says what recovers the GPU:
// RESTART_APP / IGNORE mean the GPU is healthy and only the application was
// hit; RESET_GPU / RESTART_BM (or a workflow that ends in a reset) mean the
// GPU or its driver state is broken until a reset, reboot or repair.
//
// flexslurm cannot reset a GPU in place on a Flex-Start VM: its repair is to
// report the host faulty and move or replace the VM. So an Xid whose
// immediate action is a reset or reboot because of a hardware or driver
// failure is a FAIL; an application error or an informational event is a
// warning; an Xid that needs a reset but is documented as software- or
// user-initiated is INCONCLUSIVE (drain and look, do not burn the host).
// Codes not in the table are warnings ("not classified"), never FAIL.

// xidClass is how an Xid is judged.
type xidClass int

const (
	xidWarn           xidClass = iota // application error or informational: warning
	xidFail                           // hardware or driver failure: FAIL
	xidInconclusive                   // needs a reset, not evidence of a hardware fault
	xidFailIfFatal                    // NVLink5 Xids 144–148, 150: FAIL when the message marks it fatal
	xidRecoveryAction                 // Xid 154: judged by the recovery action it announces

	xidUnknown xidClass = -1 // not in the table: warning
)

type xidInfo struct {
	mnemonic string
	class    xidClass
}

// xidTable classifies Xid codes. The comment of each entry is the
// catalogue's description and immediate action.
var xidTable = map[int]xidInfo{
	// Application errors and informational events (warnings).
	8:   {"ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", xidWarn},  // GPU stopped processing; RESTART_APP
	13:  {"ROBUST_CHANNEL_GR_EXCEPTION", xidWarn},             // Graphics Engine Exception: "general user application faults", typically out-of-bounds access; RESTART_APP
	31:  {"ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", xidWarn},   // GPU memory page fault, "typically application-level bugs"; RESTART_APP
	32:  {"ROBUST_CHANNEL_PBDMA_ERROR", xidWarn},              // invalid or corrupted push buffer stream; RESTART_APP
	43:  {"ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", xidWarn}, // "user application hits a software induced fault ... The GPU remains in a healthy state"; IGNORE
	45:  {"ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", xidWarn},       // preemptive cleanup after an abort or another Xid (judged on its own)
	63:  {"INFOROM_DRAM_RETIREMENT_EVENT", xidWarn},           // row remapping / page retirement event recorded; IGNORE, IGNORE
	69:  {"ROBUST_CHANNEL_GR_CLASS_ERROR", xidWarn},           // graphics engine class error; RESTART_APP
	92:  {"EXCESSIVE_SBE_INTERRUPTS", xidWarn},                // high single-bit (corrected) ECC error rate; IGNORE
	121: {"C2C_ERROR", xidWarn},                               // corrected C2C link errors, "no operational impact"; IGNORE
	137: {"NVLINK_PRIV_ERR", xidWarn},                         // illegal NVLink peer access, "typically application-level bugs"; IGNORE
	151: {"ROBUST_CHANNEL_KEY_ROTATION_ERROR", xidWarn},       // confidential computing key rotation; RESTART_VM
	156: {"RESOURCE_RETIREMENT_EVENT", xidWarn},               // a resource was retired, applied at the next reset (like a pending row remap)
	// Hardware or driver failures (FAIL).
	46:  {"ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", xidFail},          // GPU stopped processing; RESET_GPU
	48:  {"ROBUST_CHANNEL_GPU_ECC_DBE", xidFail},                // double-bit (uncorrectable) ECC error; "a GPU reset or node reboot is needed"
	62:  {"PMU_HALT_ERROR", xidFail},                            // internal micro-controller halt; RESET_GPU
	64:  {"INFOROM_DRAM_RETIREMENT_FAILURE", xidFail},           // GPU memory remapping failure; RESET_GPU
	74:  {"NVLINK_ERROR", xidFail},                              // NVLink error; "a GPU reset or node reboot is needed", may be a hardware failure of the link
	79:  {"ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", xidFail}, // GPU has fallen off the bus; RESTART_BM
	94:  {"ROBUST_CHANNEL_CONTAINED_ERROR", xidFail},            // contained uncorrectable memory error; NVIDIA recommends a GPU reset; the same event FAILs the ECC count
	95:  {"ROBUST_CHANNEL_UNCONTAINED_ERROR", xidFail},          // uncontained memory error; RESET_GPU
	109: {"ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", xidFail},        // context switch timeout; RESET_GPU
	110: {"SEC_FAULT_ERROR", xidFail},                           // security fault, "uncommon unless there is a hardware failure"; RESET_GPU
	119: {"GSP_RPC_TIMEOUT", xidFail},                           // GSP RPC timeout; RESET_GPU
	120: {"GSP_ERROR", xidFail},                                 // GSP error; RESET_GPU
	136: {"ALI_TRAINING_FAIL", xidFail},                         // NVLink training failed; RESET_GPU
	140: {"UNRECOVERABLE_ECC_ERROR_ESCAPE", xidFail},            // uncorrectable memory error that escaped remapping; RESET_GPU
	143: {"GPU_INIT_ERROR", xidFail},                            // GPU initialization error; RESET_GPU
	149: {"NVLINK_NETIR_ERROR", xidFail},                        // NVLink NETIR error, severity "Link Fatal"; RESET_GPU
	157: {"RESOURCE_RETIREMENT_FAILURE", xidFail},               // "no possible repairs ... due to lack of resources", like remapped_rows.failure
	158: {"GPU_FATAL_TIMEOUT", xidFail},                         // GPU fatal timeout; RESET_GPU
	167: {"PCIE_FATAL_TIMEOUT", xidFail},                        // fatal PCIe timeout (no bucket published; the GPU is unreachable as with Xid 79)
	169: {"SEC2_HALT_ERROR", xidFail},                           // internal micro-controller halt (as Xid 62)
	171: {"UNCORRECTABLE_DRAM_ERROR", xidFail},                  // detail of an Xid 48 in DRAM
	172: {"UNCORRECTABLE_SRAM_ERROR", xidFail},                  // detail of an Xid 48 in SRAM
	155: {"NVLINK_SW_DEFINED_ERROR", xidInconclusive},           // link down flagged intentional; RESET_GPU, INVESTIGATE_SW_USER
	144: {"NVLINK_SAW_ERROR", xidFailIfFatal},                   // NVLink5 errors: the "XID 144-150 Decode" sheet gives Fatal (RESET_GPU)
	145: {"NVLINK_RLW_ERROR", xidFailIfFatal},                   // or Non-fatal (IGNORE) per sub-code; the message carries
	146: {"NVLINK_TLW_ERROR", xidFailIfFatal},                   // "<fatal vs nonfatal>" after the sub-component
	147: {"NVLINK_TREX_ERROR", xidFailIfFatal},                  //
	148: {"NVLINK_NVLPW_CTRL_ERROR", xidFailIfFatal},            //
	150: {"NVLINK_MSE_ERROR", xidFailIfFatal},                   //
	154: {"GPU_RECOVERY_ACTION_CHANGED", xidRecoveryAction},     // "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
}

// recoveryActionFails reports whether an Xid 154 recovery action (the text
// in parentheses after "to 0x…") leaves the GPU unusable until a reset or
// reboot: the catalogue's values are "None", "Drain P2P", "Drain and
// Reset", "GPU Reset Required" and "Node Reboot Required"; any action that
// names a reset or a reboot fails.
func recoveryActionFails(action string) bool {
	a := strings.ToLower(action)
	return strings.Contains(a, "reset") || strings.Contains(a, "reboot")
}
