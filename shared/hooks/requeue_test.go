package hooks

import (
	"testing"
	"time"

	"github.com/flexslurm/flexslurm/shared/slurm"
)

// TestBeingRequeued holds EpilogSlurmctld's requeue rule to what a real
// Slurm 22.05 shows during the epilog (scontrol show job, JobState
// COMPLETING) in each case.
func TestBeingRequeued(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, "2026-11-30T"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		job  slurm.JobInfo
		now  time.Time
		want bool
	}{
		{"scontrol requeue: EndTime=Unknown",
			slurm.JobInfo{Restarts: 1, TimeLimit: 10 * time.Minute, StartTime: at("07:46:39")}, at("07:46:40"), true},
		{"node failure (power_down_force, DOWN), no time limit: EndTime=Unknown",
			slurm.JobInfo{Restarts: 1, StartTime: at("07:48:15")}, at("07:48:16"), true},
		{"node failure with a time limit: start reset to the requeue, end = start + limit",
			slurm.JobInfo{Restarts: 1, TimeLimit: 10 * time.Minute, StartTime: at("07:46:39"), EndTime: at("07:56:39")}, at("07:46:40"), true},
		{"cancelled while its nodes powered up: end = the cancel",
			slurm.JobInfo{TimeLimit: 10 * time.Minute, StartTime: at("07:47:05"), EndTime: at("07:47:08")}, at("07:47:08"), false},
		{"cancelled while powering up, unlimited: end = the cancel",
			slurm.JobInfo{StartTime: at("07:48:41"), EndTime: at("07:48:45")}, at("07:48:45"), false},
		{"cancelled after an earlier requeue",
			slurm.JobInfo{Restarts: 1, TimeLimit: 10 * time.Minute, StartTime: at("07:47:05"), EndTime: at("07:47:08")}, at("07:47:09"), false},
		{"ended at its time limit after a requeue",
			slurm.JobInfo{Restarts: 2, TimeLimit: 10 * time.Minute, StartTime: at("07:40:00"), EndTime: at("07:50:00")}, at("07:50:00"), false},
		{"completed",
			slurm.JobInfo{TimeLimit: time.Hour, StartTime: at("07:00:00"), EndTime: at("07:20:00")}, at("07:20:01"), false},
	} {
		if got := beingRequeued(tc.job, tc.now); got != tc.want {
			t.Errorf("%s: beingRequeued = %v, want %v", tc.name, got, tc.want)
		}
	}
}
