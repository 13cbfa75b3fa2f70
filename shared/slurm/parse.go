package slurm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexslurm/flexslurm/shared/slurmstate"
	"github.com/flexslurm/flexslurm/shared/text"
)

// slurmTimeLayout is how scontrol prints times: local time, to the second.
const slurmTimeLayout = "2006-01-02T15:04:05"

// ErrParse marks Slurm output that could not be understood.
var ErrParse = errors.New("unexpected Slurm output")

// keyRE is the start of a "Key=value" word in `scontrol show … -o` output.
// Keys hold letters, digits, '_', '/' and ':' (AllocNode:Sid, CPUs/Task,
// ReqB:S:C:T).
var keyRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_/:]*=`)

// ParseKV splits one line of `scontrol show node|job|reservation -o` into
// its Key=value pairs. A value runs until the next word that starts a key, so
// values with spaces (Reason=…, OS=…) are kept whole; a value that itself
// contains " word=" is cut there (Slurm offers no quoting).
func ParseKV(line string) map[string]string {
	kv := map[string]string{}
	key := ""
	for _, w := range strings.Split(line, " ") {
		if loc := keyRE.FindStringIndex(w); loc != nil {
			key = w[:loc[1]-1]
			kv[key] = w[loc[1]:]
			continue
		}
		if key != "" {
			kv[key] += " " + w
		}
	}
	for k, v := range kv {
		kv[k] = strings.TrimSpace(v)
	}
	return kv
}

// reasonSuffixRE is the " [user@time]" that scontrol appends to a reason.
var reasonSuffixRE = regexp.MustCompile(`\s*\[[^\]\[]*@[^\]\[]*\]$`)

func stripReasonSuffix(r string) string {
	return reasonSuffixRE.ReplaceAllString(strings.TrimSpace(r), "")
}

// nullable maps scontrol's "(null)" to "".
func nullable(s string) string {
	if s == "(null)" {
		return ""
	}
	return s
}

// lines returns the non-empty lines of out.
func lines(out []byte) []string {
	var ls []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

// showRecords splits `scontrol show <what> -o` output into its records,
// one key=value map a line (ParseKV), leaving out Slurm's "No <what>s in
// the system" line; a record without its name (key) is an ErrParse naming
// the line.
func showRecords(out []byte, what, key string) ([]map[string]string, error) {
	var recs []map[string]string
	for _, l := range lines(out) {
		if strings.HasPrefix(l, "No "+what+"s in the system") {
			continue
		}
		kv := ParseKV(l)
		if kv[key] == "" {
			return nil, fmt.Errorf("%w: scontrol show %s line without %s: %q", ErrParse, what, key, text.Truncate(l, 200))
		}
		recs = append(recs, kv)
	}
	return recs, nil
}

// ParseShowNodes parses `scontrol show node -o` output: one node per line.
func ParseShowNodes(out []byte) ([]NodeInfo, error) {
	recs, err := showRecords(out, "node", "NodeName")
	if err != nil {
		return nil, err
	}
	var nodes []NodeInfo
	for _, kv := range recs {
		name := kv["NodeName"]
		n := NodeInfo{Name: name, Addr: kv["NodeAddr"], Hostname: kv["NodeHostName"],
			Node: slurmstate.ParseNode(name, strings.Split(kv["State"], "+"), stripReasonSuffix(nullable(kv["Reason"])))}
		if p, err := strconv.Atoi(kv["Port"]); err == nil {
			n.Port = p
		}
		if p := nullable(kv["Partitions"]); p != "" {
			n.Partitions = strings.Split(p, ",")
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// ParseShowJobs parses `scontrol show job -o` output: one job per line.
func ParseShowJobs(out []byte) ([]JobInfo, error) {
	var jobs []JobInfo
	for _, l := range lines(out) {
		if strings.HasPrefix(l, "No jobs in the system") {
			continue
		}
		kv := ParseKV(l)
		id, err := strconv.ParseInt(kv["JobId"], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: scontrol show job line without a numeric JobId: %q", ErrParse, text.Truncate(l, 200))
		}
		j := JobInfo{JobID: id, ID: kv["JobId"], Reason: kv["Reason"], Partition: kv["Partition"]}
		if a, t := kv["ArrayJobId"], kv["ArrayTaskId"]; a != "" && t != "" && isDigits(t) {
			j.ID = a + "_" + t
		}
		j.State, j.StateFlags = slurmstate.ParseJobState(strings.Split(kv["JobState"], "+"))
		if nl := nullable(kv["NodeList"]); nl != "" {
			j.NodeList = nl
			if j.Nodes, err = ExpandHostlist(nl); err != nil {
				return nil, fmt.Errorf("%w: job %s: %w", ErrParse, j.ID, err)
			}
		}
		lo, _, _ := strings.Cut(kv["NumNodes"], "-")
		j.NodeCount, _ = strconv.Atoi(lo)
		j.Restarts, _ = strconv.Atoi(kv["Restarts"])
		j.Priority, _ = strconv.ParseInt(kv["Priority"], 10, 64)
		j.TimeLimit, _ = ParseDuration(kv["TimeLimit"])
		j.Comment = nullable(kv["Comment"])
		j.StartTime, _ = time.ParseInLocation(slurmTimeLayout, kv["StartTime"], time.Local)
		j.EndTime, _ = time.ParseInLocation(slurmTimeLayout, kv["EndTime"], time.Local)
		j.SubmitTime, _ = time.ParseInLocation(slurmTimeLayout, kv["SubmitTime"], time.Local)
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// ParseShowReservations parses `scontrol show reservation -o` output.
func ParseShowReservations(out []byte) ([]Reservation, error) {
	recs, err := showRecords(out, "reservation", "ReservationName")
	if err != nil {
		return nil, err
	}
	var rs []Reservation
	for _, kv := range recs {
		r := Reservation{Name: kv["ReservationName"], State: kv["State"]}
		if nl := nullable(kv["Nodes"]); nl != "" {
			r.NodeList = nl
			nodes, err := ExpandHostlist(nl)
			if err != nil {
				return nil, fmt.Errorf("%w: reservation %s: %w", ErrParse, r.Name, err)
			}
			r.Nodes = nodes
		}
		if f := nullable(kv["Flags"]); f != "" {
			r.Flags = strings.Split(strings.ToUpper(f), ",")
		}
		r.StartTime, _ = time.ParseInLocation(slurmTimeLayout, kv["StartTime"], time.Local)
		r.EndTime, _ = time.ParseInLocation(slurmTimeLayout, kv["EndTime"], time.Local)
		rs = append(rs, r)
	}
	return rs, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ParseDuration parses a Slurm time value — "minutes", "minutes:seconds",
// "hours:minutes:seconds", "days-hours", "days-hours:minutes" or
// "days-hours:minutes:seconds" — as printed for TimeLimit and accepted by
// --time. "UNLIMITED", "INFINITE", "NOT_SET", "N/A" and "" are 0 with no
// error.
func ParseDuration(s string) (time.Duration, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "UNLIMITED", "INFINITE", "NOT_SET", "N/A", "PARTITION_LIMIT":
		return 0, nil
	}
	bad := fmt.Errorf("%w: %q is not a Slurm time value", ErrParse, s)
	days := 0
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, bad
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, bad
		}
		nums[i] = n
	}
	var h, m, sec int
	switch {
	case days > 0 && len(nums) == 1:
		h = nums[0]
	case days > 0 && len(nums) == 2:
		h, m = nums[0], nums[1]
	case len(nums) == 3:
		h, m, sec = nums[0], nums[1], nums[2]
	case days == 0 && len(nums) == 2:
		m, sec = nums[0], nums[1]
	case days == 0 && len(nums) == 1:
		m = nums[0]
	default:
		return 0, bad
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour +
		time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, nil
}

// --- JSON (squeue --json, sinfo --json) ---

// jsonNumber decodes Slurm's numbers in both shapes: a plain number or null
// (22.05, openapi/v0.0.38) and {"set": bool, "infinite": bool, "number": N}
// (23.02+ data_parser).
type jsonNumber struct {
	Value    int64
	Set      bool
	Infinite bool
}

func (n *jsonNumber) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*n = jsonNumber{}
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			Set      bool    `json:"set"`
			Infinite bool    `json:"infinite"`
			Number   float64 `json:"number"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		*n = jsonNumber{Value: int64(o.Number), Set: o.Set, Infinite: o.Infinite}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = jsonNumber{Value: int64(f), Set: true}
	return nil
}

// jsonWords decodes a string or a list of strings (job_state, node state).
type jsonWords []string

func (w *jsonWords) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*w = nil
	case len(b) > 0 && b[0] == '[':
		var l []string
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		*w = l
	default:
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*w = []string{s}
	}
	return nil
}

// jsonText decodes a string, or an object carrying one in "description" or
// "name" (some 23.11+ fields), or null.
type jsonText string

func (t *jsonText) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*t = ""
	case len(b) > 0 && b[0] == '{':
		var o struct {
			Description string `json:"description"`
			Name        string `json:"name"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		*t = jsonText(o.Description + o.Name)
	default:
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = jsonText(s)
	}
	return nil
}

type jsonErrors []struct {
	Error       string `json:"error"`
	Description string `json:"description"`
}

func (e jsonErrors) err() error {
	if len(e) == 0 {
		return nil
	}
	var msgs []string
	for _, x := range e {
		msgs = append(msgs, strings.TrimSpace(x.Error+" "+x.Description))
	}
	return fmt.Errorf("slurm reported errors: %s", strings.Join(msgs, "; "))
}

type jsonJob struct {
	JobID            jsonNumber `json:"job_id"`
	ArrayJobID       jsonNumber `json:"array_job_id"`
	ArrayTaskID      jsonNumber `json:"array_task_id"`
	JobState         jsonWords  `json:"job_state"`
	StateReason      jsonText   `json:"state_reason"`
	StateDescription jsonText   `json:"state_description"`
	Partition        jsonText   `json:"partition"`
	Nodes            jsonText   `json:"nodes"`
	NodeCount        jsonNumber `json:"node_count"`
	RestartCnt       jsonNumber `json:"restart_cnt"`
	TimeLimit        jsonNumber `json:"time_limit"` // minutes
	Priority         jsonNumber `json:"priority"`
}

// ParseSqueueJSON parses `squeue --json` output of Slurm 22.05
// (openapi/v0.0.38: job_state a string, numbers plain or null) and of
// 23.02+ (data_parser: job_state a list, numbers as {set, infinite, number}).
// It returns every job listed: squeue 22.05 ignores filters with --json, so
// callers filter themselves. Errors listed in the output's "errors" are
// returned.
func ParseSqueueJSON(out []byte) ([]JobInfo, error) {
	var doc struct {
		Jobs   []jsonJob  `json:"jobs"`
		Errors jsonErrors `json:"errors"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("%w: squeue --json: %w", ErrParse, err)
	}
	if err := doc.Errors.err(); err != nil && len(doc.Jobs) == 0 {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	jobs := make([]JobInfo, 0, len(doc.Jobs))
	for _, x := range doc.Jobs {
		j := JobInfo{
			JobID:       x.JobID.Value,
			ID:          strconv.FormatInt(x.JobID.Value, 10),
			Reason:      string(x.StateReason),
			Description: string(x.StateDescription),
			Partition:   string(x.Partition),
			NodeList:    string(x.Nodes),
			NodeCount:   int(x.NodeCount.Value),
			Restarts:    int(x.RestartCnt.Value),
			Priority:    x.Priority.Value,
		}
		if x.ArrayJobID.Value != 0 && x.ArrayTaskID.Set && !x.ArrayTaskID.Infinite && x.ArrayTaskID.Value >= 0 &&
			x.ArrayTaskID.Value < 1<<31-1 {
			j.ID = fmt.Sprintf("%d_%d", x.ArrayJobID.Value, x.ArrayTaskID.Value)
		}
		j.State, j.StateFlags = slurmstate.ParseJobState(x.JobState)
		if x.TimeLimit.Set && !x.TimeLimit.Infinite && x.TimeLimit.Value > 0 && x.TimeLimit.Value < 1<<31-1 {
			j.TimeLimit = time.Duration(x.TimeLimit.Value) * time.Minute
		}
		if j.NodeList != "" {
			nodes, err := ExpandHostlist(j.NodeList)
			if err != nil {
				return nil, fmt.Errorf("%w: squeue --json job %s: %w", ErrParse, j.ID, err)
			}
			j.Nodes = nodes
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

type jsonNode struct {
	Name       string     `json:"name"`
	State      jsonWords  `json:"state"`
	StateFlags []string   `json:"state_flags"` // 22.05 only
	Reason     jsonText   `json:"reason"`
	Address    string     `json:"address"`
	Hostname   string     `json:"hostname"`
	Port       jsonNumber `json:"port"`
	Partitions []string   `json:"partitions"`
}

// jsonSinfoRecord is one element of the "sinfo" list of Slurm 23.11+: a
// group of nodes sharing a partition and state.
type jsonSinfoRecord struct {
	Node struct {
		State jsonWords `json:"state"`
	} `json:"node"`
	Nodes struct {
		Nodes     []string `json:"nodes"`
		Hostnames []string `json:"hostnames"`
		Addresses []string `json:"addresses"`
	} `json:"nodes"`
	Partition struct {
		Name string `json:"name"`
	} `json:"partition"`
	Reason jsonText `json:"reason"`
}

// ParseSinfoJSON parses `sinfo --json` output in the shapes of Slurm 22.05
// ("nodes": [{name, state: "idle", state_flags: [...]}]), 23.02
// ("nodes": [{name, state: ["IDLE", "CLOUD", …]}]) and 23.11+
// ("sinfo": [{nodes: {nodes: [names]}, node: {state: [...]}, partition}]).
// It returns one NodeInfo per node name, in first-seen order, with the
// partitions of every record that listed it. Filters given to sinfo are
// ignored by 22.05 with --json: callers filter themselves.
func ParseSinfoJSON(out []byte) ([]NodeInfo, error) {
	var doc struct {
		Nodes  []jsonNode        `json:"nodes"`
		Sinfo  []jsonSinfoRecord `json:"sinfo"`
		Errors jsonErrors        `json:"errors"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("%w: sinfo --json: %w", ErrParse, err)
	}
	if err := doc.Errors.err(); err != nil && len(doc.Nodes) == 0 && len(doc.Sinfo) == 0 {
		return nil, fmt.Errorf("sinfo --json: %w", err)
	}
	var nodes []NodeInfo
	index := map[string]int{}
	for _, x := range doc.Nodes {
		if x.Name == "" {
			continue
		}
		n := NodeInfo{Name: x.Name, Addr: x.Address, Hostname: x.Hostname, Port: int(x.Port.Value), Partitions: x.Partitions,
			Node: slurmstate.ParseNode(x.Name, append(append([]string{}, x.State...), x.StateFlags...), stripReasonSuffix(string(x.Reason)))}
		index[n.Name] = len(nodes)
		nodes = append(nodes, n)
	}
	for _, r := range doc.Sinfo {
		for i, name := range r.Nodes.Nodes {
			if k, ok := index[name]; ok {
				if p := r.Partition.Name; p != "" && !slices.Contains(nodes[k].Partitions, p) {
					nodes[k].Partitions = append(nodes[k].Partitions, p)
				}
				continue
			}
			n := NodeInfo{Name: name, Node: slurmstate.ParseNode(name, r.Node.State, stripReasonSuffix(string(r.Reason)))}
			if i < len(r.Nodes.Addresses) {
				n.Addr = r.Nodes.Addresses[i]
			}
			if i < len(r.Nodes.Hostnames) {
				n.Hostname = r.Nodes.Hostnames[i]
			}
			if r.Partition.Name != "" {
				n.Partitions = []string{r.Partition.Name}
			}
			index[name] = len(nodes)
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}
