package plan

import "testing"

// TestRespondOtherActions: a failure of any other action is never
// recorded; it is retried when waiting may help, else left to the
// reconciler.
func TestRespondOtherActions(t *testing.T) {
	others := []Action{
		CancelResizeRequest{Pool: "a3u", Name: "rr"}, DeleteResizeRequest{Pool: "a3u", Name: "rr"},
		DeleteVMs{Pool: "a3u", VMs: []string{"vm"}}, StartVM{Pool: "a3u", VM: "vm"}, EnsurePool{Pool: "a3u"},
		DeleteMIG{Pool: "a3u"}, SlurmCommand{Command: "drain"},
	}
	retried := map[FailureClass]bool{FailTransient: true, FailRateLimit: true, FailNotReady: true}
	for _, a := range others {
		for c := FailTransient; c <= FailPermanent; c++ {
			want := LeaveToReconciler
			if retried[c] {
				want = RetryEvent
			}
			if got := Respond(Failure{Action: a, Class: c}); got != want {
				t.Errorf("Respond(%T, %s) = %s, want %s", a, c, got, want)
			}
		}
	}
}

// TestRespondTable spells the decisions out, case by case.
func TestRespondTable(t *testing.T) {
	hr := ReportHostAsFaulty{Pool: "a3u", Node: "flexvm-a3u-0"}
	create := CreateResizeRequest{Pool: "a3u", Name: "rr"}
	del := DeleteVMs{Pool: "a3u", VMs: []string{"vm"}}
	for _, tc := range []struct {
		name string
		f    Failure
		want Response
	}{
		{"host repair refused as invalid: replace the VM", Failure{hr, FailPermanent, "INVALID_ARGUMENT"}, RecordHostRepairFailed},
		{"host repair of a VM not RUNNING: replace the VM", Failure{hr, FailNotReady, "RESOURCE_NOT_READY"}, RecordHostRepairFailed},
		{"host repair of a VM gone: replace it", Failure{hr, FailNotFound, "RESOURCE_NOT_FOUND"}, RecordHostRepairFailed},
		{"host repair, server error: retry", Failure{hr, FailTransient, "INTERNAL_ERROR"}, RetryEvent},
		{"host repair, rate-limited: retry", Failure{hr, FailRateLimit, "rateLimitExceeded"}, RetryEvent},
		{"stock-out: back off", Failure{create, FailCapacity, "ZONE_RESOURCE_POOL_EXHAUSTED"}, RecordProvisioningFailed},
		{"quota: back off", Failure{create, FailQuota, "QUOTA_EXCEEDED"}, RecordProvisioningFailed},
		{"request refused: back off", Failure{create, FailPermanent, "INVALID_ARGUMENT"}, RecordProvisioningFailed},
		{"request, server error: retry", Failure{create, FailTransient, "INTERNAL_ERROR"}, RetryEvent},
		{"request's MIG refused with its workload policy: record it", Failure{create, FailWorkloadPolicy, "HTTP_400"}, RecordProvisioningFailed},
		{"request exists already: leave it", Failure{create, FailAlreadyExists, "RESOURCE_ALREADY_EXISTS"}, LeaveToReconciler},
		{"deletion, server error: retry", Failure{del, FailTransient, ""}, RetryEvent},
		{"deletion of a VM not ours: leave it", Failure{del, FailPermanent, ""}, LeaveToReconciler},
		{"deletion while another operation runs: retry", Failure{del, FailNotReady, "RESOURCE_NOT_READY"}, RetryEvent},
		{"Slurm command not published: retry", Failure{SlurmCommand{Command: "drain"}, FailTransient, ""}, RetryEvent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Respond(tc.f); got != tc.want {
				t.Errorf("Respond = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFailureClassProvisioning: only capacity, quota and permanent
// failures back a pool off, each as its class; a refused workload policy
// is recorded as its own class (which backs nothing off: placement.go).
func TestFailureClassProvisioning(t *testing.T) {
	want := map[FailureClass]string{FailCapacity: ClassCapacity, FailQuota: ClassQuota, FailPermanent: ClassPermanent,
		FailWorkloadPolicy: ClassWorkloadPolicy}
	for c := FailureClass(0); c <= FailWorkloadPolicy+1; c++ {
		if got := c.Provisioning(); got != want[c] {
			t.Errorf("%s.Provisioning() = %q, want %q", c, got, want[c])
		}
	}
}
