package plan

import (
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/event"
	"github.com/flexslurm/flexslurm/shared/model"
)

func TestRequestRunDuration(t *testing.T) {
	const allowance = 15 * time.Minute
	on := func(runDuration time.Duration) *model.Pool {
		return &model.Pool{ID: "a3u", MaxRunDuration: runDuration, RunDuration: runDuration, UseJobDuration: true}
	}
	week := 7 * 24 * time.Hour
	tests := []struct {
		name      string
		pool      *model.Pool
		limits    []time.Duration
		allowance time.Duration
		want      time.Duration
	}{
		{"a pool that has not opted in asks its maximum", &model.Pool{RunDuration: week}, []time.Duration{2 * time.Hour}, allowance, week},
		{"the job's limit plus the boot allowance", on(week), []time.Duration{2 * time.Hour}, allowance, 2*time.Hour + allowance},
		{"the longest of the jobs' limits", on(week), []time.Duration{time.Hour, 5 * time.Hour, 2 * time.Hour}, allowance, 5*time.Hour + allowance},
		{"a job with no time limit gets the pool's maximum", on(week), []time.Duration{2 * time.Hour, 0}, allowance, week},
		{"no job named: the pool's maximum", on(week), nil, allowance, week},
		{"never above the pool's max run duration", on(3 * time.Hour), []time.Duration{3 * time.Hour}, allowance, 3 * time.Hour},
		{"never above Compute's 604800 s", on(week), []time.Duration{week}, allowance, week},
		{"at least Compute's 600 s", on(week), []time.Duration{time.Minute}, 2 * time.Minute, 600 * time.Second},
		{"a pool below 600 s asks Compute's floor", on(600 * time.Second), []time.Duration{time.Hour}, allowance, 600 * time.Second},
		{"whole seconds, rounded up", on(week), []time.Duration{time.Hour + 1500*time.Millisecond}, allowance, time.Hour + allowance + 2*time.Second},
		{"a negative allowance adds nothing", on(week), []time.Duration{2 * time.Hour}, -time.Hour, 2 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RequestRunDuration(tc.pool, tc.limits, tc.allowance); got != tc.want {
				t.Errorf("RequestRunDuration(%+v, %v, %v) = %v, want %v", *tc.pool, tc.limits, tc.allowance, got, tc.want)
			}
		})
	}
}

// TestJobSizedRequests: on a pool that opted in, a pending job's resize
// request asks for its time limit plus the boot allowance, recorded on
// its nodes, so that a request issued again (Redrive) asks the same; a job
// with no time limit, a static node's request and a pool that has not
// opted in ask the pool's run duration.
func TestJobSizedRequests(t *testing.T) {
	runDurations := func(actions []Action) map[string]time.Duration {
		out := map[string]time.Duration{}
		for _, a := range actions {
			if c, ok := a.(CreateResizeRequest); ok {
				out[c.Name] = c.RunDuration
			}
		}
		return out
	}
	pending := func(id string, limit time.Duration) *event.Job {
		ev := jobEv(event.TypeJobPending, id, 1)
		ev.TimeLimitSeconds = int64(limit / time.Second)
		return ev
	}
	for _, tc := range []struct {
		name       string
		opted      bool
		oneEach    bool
		limit      time.Duration
		want       time.Duration // 0: the pool's
		wantRecord time.Duration
	}{
		{name: "2 h job", opted: true, limit: 2 * time.Hour, want: 2*time.Hour + 15*time.Minute, wantRecord: 2*time.Hour + 15*time.Minute},
		{name: "2 h job, one request per node", opted: true, oneEach: true, limit: 2 * time.Hour, want: 2*time.Hour + 15*time.Minute, wantRecord: 2*time.Hour + 15*time.Minute},
		{name: "no time limit", opted: true},
		{name: "pool not opted in", limit: 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, c := applied(t)
			pool := st.Pools["a3u"]
			pool.UseJobDuration = tc.opted
			pol := Policy{OneNodePerRequest: tc.oneEach}
			want := tc.want
			if want == 0 {
				want = pool.RunDuration
			}
			acts, err := Job(st, c, pending("7", tc.limit), t0, pol)
			if err != nil {
				t.Fatal(err)
			}
			got := runDurations(acts)
			if len(got) != 1 {
				t.Fatalf("resize requests = %v, want one", got)
			}
			for name, d := range got {
				if d != want {
					t.Errorf("request %s asks %v, want %v", name, d, want)
				}
			}
			var reserved []time.Time
			for _, a := range acts {
				if c, ok := a.(SlurmCommand); ok && c.Command == event.SlurmReservationCreate && c.Reservation == eolName("flexvm-a3u-1") {
					reserved = append(reserved, c.StartTime)
				}
			}
			switch {
			case tc.wantRecord > 0 && (len(reserved) != 1 || !reserved[0].Equal(t0.Add(tc.wantRecord-15*time.Minute))):
				t.Errorf("end-of-life reservation placed with the request at %v, want one at %v (the VM's earliest end less the boot allowance)", reserved, t0.Add(tc.wantRecord-15*time.Minute))
			case tc.wantRecord == 0 && len(reserved) != 0:
				t.Errorf("end-of-life reservation placed with a request of the pool's run duration at %v, want none before the VM runs", reserved)
			}
			Apply(st, acts)
			if n := st.Nodes["flexvm-a3u-1"]; n.RunDuration != tc.wantRecord {
				t.Errorf("node record RunDuration = %v, want %v", n.RunDuration, tc.wantRecord)
			}
			again := runDurations(Redrive(st))
			for name, d := range got {
				if again[name] != d {
					t.Errorf("re-driven request %s asks %v, want %v as first asked", name, again[name], d)
				}
			}
			for name, d := range again {
				if _, job := got[name]; !job && d != pool.RunDuration {
					t.Errorf("static node's request %s asks %v, want the pool's %v", name, d, pool.RunDuration)
				}
			}
		})
	}
}

// TestEndOfLifeKeepsTheBootAllowanceOfAJobSizedVM: when the VM runs, a
// job-sized node's reservation starts the boot allowance before the VM's
// end (a job placed while the node boots starts late); any other node's
// starts at the end, as before.
func TestEndOfLifeKeepsTheBootAllowanceOfAJobSizedVM(t *testing.T) {
	end := t0.Add(2*time.Hour + 15*time.Minute)
	for _, tc := range []struct {
		runDuration time.Duration
		want        time.Time
	}{{0, end}, {2*time.Hour + 15*time.Minute, end.Add(-15 * time.Minute)}} {
		b := newBuilder(model.NewState(), t0, Policy{})
		b.reserveEndOfLife(model.Node{Name: "flexvm-a3u-1", VMName: "flexvm-a3u-1-g1", JobID: "7", RunDuration: tc.runDuration, TerminationTime: end})
		if len(b.out) != 1 {
			t.Fatalf("actions %v, want one reservation", b.out)
		}
		if c := b.out[0].(SlurmCommand); !c.StartTime.Equal(tc.want) {
			t.Errorf("run duration %v: reservation starts %v, want %v", tc.runDuration, c.StartTime, tc.want)
		}
	}
}
