package health

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/flexslurm/flexslurm/shared/text"
)

// DCGM error categories (dcgmErrorCategory_t, "Diagnostic Errors" in the
// DCGM documentation) carried by each structured warning of a result.
const (
	dcgmCatPerfThreshold   = 1
	dcgmCatPerfViolation   = 2
	dcgmCatSoftwareConfig  = 3  // first software category …
	dcgmCatSoftwareOther   = 8  // … last (library, Xid, CUDA, EUD, other)
	dcgmCatHardwareThermal = 9  // first hardware category …
	dcgmCatHardwareOther   = 15 // … last (memory, NVLink, NVSwitch, PCIe, power, other)
	dcgmCatInternalOther   = 16
)

// DCGM error severities (dcgmErrorSeverity_t): ISOLATE and RESET call for
// taking the GPU out of service, CONFIG for fixing the node's configuration.
const (
	dcgmSevIsolate = 2
	dcgmSevConfig  = 5
	dcgmSevReset   = 6
)

// dcgmWarning is one warning of a DCGM test result. DCGM 2.x/3.x print
// plain strings or objects; 4.x prints objects with the error's id,
// category and severity. Category and Severity are -1 when absent.
type dcgmWarning struct {
	Text     string
	ErrorID  int
	Category int
	Severity int
}

// dcgmResult is one entry of a test's "results": one GPU (or, for the
// deployment/software test, all GPUs).
type dcgmResult struct {
	Category    string // "Deployment", "Hardware", "Integration", …
	Test        string // test name as printed
	EntityGroup string // "GPU" (4.x entity_group), "" for 3.x
	EntityID    string // 4.x entity_id, or 3.x gpu_ids ("0" or "0,1,2"), as printed
	Status      string // as printed: Pass, Fail, Warn, Skip, …
	Warnings    []dcgmWarning
	Info        []string
}

// dcgmReport is the parsed JSON of `dcgmi diag -j`.
type dcgmReport struct {
	Results      []dcgmResult
	RuntimeError string
}

// JSON shapes of `dcgmi diag -j`. DCGM 2.x/3.x wrap everything in
// "DCGM GPU Diagnostic", 4.x in "DCGM Diagnostic"; both hold
// test_categories → tests → results.
type dcgmJSONDoc struct {
	TestCategories []dcgmJSONCategory `json:"test_categories"`
	RuntimeError   string             `json:"runtime_error"`
}

type dcgmJSONCategory struct {
	Category string         `json:"category"`
	Tests    []dcgmJSONTest `json:"tests"`
}

type dcgmJSONTest struct {
	Name        string           `json:"name"`
	Results     []dcgmJSONResult `json:"results"`
	TestSummary *struct {
		Status string `json:"status"`
	} `json:"test_summary"`
}

type dcgmJSONResult struct {
	GPUIDs      json.RawMessage   `json:"gpu_ids"`
	GPUID       json.RawMessage   `json:"gpu_id"`
	EntityGroup string            `json:"entity_group"`
	EntityID    json.RawMessage   `json:"entity_id"`
	Status      string            `json:"status"`
	Warnings    []json.RawMessage `json:"warnings"`
	Info        json.RawMessage   `json:"info"`
}

type dcgmJSONWarning struct {
	Warning  string `json:"warning"`
	ErrorID  *int   `json:"error_id"`
	Category *int   `json:"error_category"`
	Severity *int   `json:"error_severity"`
}

var errNoDCGMJSON = errors.New("no DCGM diagnostic JSON in the output")

// parseDCGMDiag parses `dcgmi diag -r 1 -j`. Text before the JSON object
// (dcgmi prints "Successfully ran diagnostic for group." on some versions)
// and after it is ignored; the verdict comes only from each result's
// "status", never from words elsewhere. Input above MaxOutputBytes is an
// error.
func parseDCGMDiag(data []byte) (dcgmReport, error) {
	var rep dcgmReport
	if len(data) > MaxOutputBytes {
		return rep, errInputTooLarge
	}
	start := bytes.IndexByte(data, '{')
	if start < 0 {
		return rep, errNoDCGMJSON
	}
	var top map[string]json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(data[start:])).Decode(&top); err != nil {
		return rep, fmt.Errorf("%w: %w", errNoDCGMJSON, err)
	}
	raw, ok := top["DCGM GPU Diagnostic"]
	if !ok {
		raw, ok = top["DCGM Diagnostic"]
	}
	if !ok {
		return rep, fmt.Errorf("%w: neither \"DCGM GPU Diagnostic\" nor \"DCGM Diagnostic\" at the top level", errNoDCGMJSON)
	}
	var doc dcgmJSONDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return rep, fmt.Errorf("decoding DCGM diagnostic JSON: %w", err)
	}
	rep.RuntimeError = doc.RuntimeError
	for _, c := range doc.TestCategories {
		for _, t := range c.Tests {
			if len(t.Results) == 0 && t.TestSummary != nil {
				rep.Results = append(rep.Results, dcgmResult{Category: c.Category, Test: t.Name, Status: t.TestSummary.Status})
				continue
			}
			for _, r := range t.Results {
				res, err := convertDCGMResult(c.Category, t.Name, r)
				if err != nil {
					return dcgmReport{}, fmt.Errorf("test %q: %w", t.Name, err)
				}
				rep.Results = append(rep.Results, res)
			}
		}
	}
	return rep, nil
}

func convertDCGMResult(category, test string, r dcgmJSONResult) (dcgmResult, error) {
	res := dcgmResult{Category: category, Test: test, EntityGroup: r.EntityGroup, Status: r.Status}
	var err error
	for _, raw := range []json.RawMessage{r.EntityID, r.GPUIDs, r.GPUID} {
		if res.EntityID, err = scalarString(raw); err != nil {
			return res, err
		}
		if res.EntityID != "" {
			break
		}
	}
	for _, raw := range r.Warnings {
		w := dcgmWarning{Category: -1, Severity: -1}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			w.Text = s
		} else {
			var o dcgmJSONWarning
			if err := json.Unmarshal(raw, &o); err != nil {
				return res, fmt.Errorf("warning %s is neither a string nor an object", text.Truncate(string(raw), 80))
			}
			w.Text = o.Warning
			if o.ErrorID != nil {
				w.ErrorID = *o.ErrorID
			}
			// Negative values are not DCGM enums: treated as absent.
			if o.Category != nil && *o.Category >= 0 {
				w.Category = *o.Category
			}
			if o.Severity != nil && *o.Severity >= 0 {
				w.Severity = *o.Severity
			}
		}
		res.Warnings = append(res.Warnings, w)
	}
	if len(r.Info) > 0 && string(r.Info) != "null" {
		var list []string
		var one string
		switch {
		case json.Unmarshal(r.Info, &list) == nil:
			res.Info = list
		case json.Unmarshal(r.Info, &one) == nil:
			res.Info = []string{one}
		default:
			return res, fmt.Errorf("info %s is neither a string nor a list of strings", text.Truncate(string(r.Info), 80))
		}
	}
	return res, nil
}

// scalarString renders a JSON string or number as text ("" for absent or
// null).
func scalarString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fmt.Errorf("GPU id %s is neither a string nor a number", text.Truncate(string(raw), 80))
	}
	return n.String(), nil
}

// format renders r as DCGM 4.x JSON (used by the fuzz round trip).
func (r dcgmReport) format() ([]byte, error) {
	doc := map[string]any{}
	var cats []map[string]any
	for _, res := range r.Results {
		warnings := []any{}
		for _, w := range res.Warnings {
			o := map[string]any{"warning": w.Text, "error_id": w.ErrorID}
			if w.Category >= 0 {
				o["error_category"] = w.Category
			}
			if w.Severity >= 0 {
				o["error_severity"] = w.Severity
			}
			warnings = append(warnings, o)
		}
		result := map[string]any{"status": res.Status, "warnings": warnings, "info": res.Info}
		if res.EntityGroup != "" {
			result["entity_group"] = res.EntityGroup
		}
		if res.EntityID != "" {
			result["entity_id"] = res.EntityID
		}
		cats = append(cats, map[string]any{"category": res.Category, "tests": []any{
			map[string]any{"name": res.Test, "results": []any{result}},
		}})
	}
	doc["test_categories"] = cats
	if r.RuntimeError != "" {
		doc["runtime_error"] = r.RuntimeError
	}
	return json.Marshal(map[string]any{"DCGM Diagnostic": doc})
}

// entity names the GPU(s) of a result for evidence.
func (r dcgmResult) entity() string {
	switch {
	case r.EntityID == "":
		return "all GPUs"
	case r.EntityGroup != "" && r.EntityGroup != "GPU":
		return r.EntityGroup + " " + r.EntityID
	case strings.Contains(r.EntityID, ","):
		return "GPUs " + r.EntityID
	}
	return "GPU " + r.EntityID
}

// dcgmStatus normalises a result status: "pass", "fail", "warn", "skip" or
// "" for a status this check does not know.
func dcgmStatus(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "pass", "passed":
		return "pass"
	case "fail", "failed":
		return "fail"
	case "warn", "warning":
		return "warn"
	case "skip", "skipped", "not run", "notrun", "not_run":
		return "skip"
	}
	return ""
}

// dcgmFailureIsHardware decides whether a failed result is evidence of a
// hardware fault (FAIL) or of the node's software or configuration
// (INCONCLUSIVE: replacing the VM with the same image would not help).
//
// With structured warnings (DCGM 4.x), a failure is hardware when a warning
// has a hardware or performance category (DCGM_FR_EC_HARDWARE_*,
// DCGM_FR_EC_PERF_*) or the ISOLATE or RESET severity, or carries no
// category at all; it is software when every warning is in a software or
// internal category (config, library, Xid, CUDA, EUD, other, internal).
// Without them (DCGM 2.x/3.x), failures of the Deployment category's
// software checks (denylist, libraries, permissions, persistence mode,
// environment variables, graphics processes) are software, except the
// page-retirement/row-remap and InfoROM checks, which read hardware state;
// every other category is hardware.
func dcgmFailureIsHardware(r dcgmResult) bool {
	structured := false
	for _, w := range r.Warnings {
		if w.Category < 0 && w.Severity < 0 {
			continue
		}
		structured = true
		if dcgmWarningIsHardware(w) {
			return true
		}
	}
	if structured {
		return false
	}
	name := strings.ToLower(r.Test)
	if strings.EqualFold(r.Category, "Deployment") || name == "software" {
		return strings.Contains(name, "page retirement") || strings.Contains(name, "row remap") || strings.Contains(name, "inforom")
	}
	return true
}

// dcgmWarningIsHardware classifies one structured warning (see
// dcgmFailureIsHardware).
func dcgmWarningIsHardware(w dcgmWarning) bool {
	switch {
	case w.Severity == dcgmSevIsolate, w.Severity == dcgmSevReset,
		w.Category == dcgmCatPerfThreshold, w.Category == dcgmCatPerfViolation,
		w.Category >= dcgmCatHardwareThermal && w.Category <= dcgmCatHardwareOther:
		return true
	case w.Category >= dcgmCatSoftwareConfig && w.Category <= dcgmCatSoftwareOther,
		w.Category == dcgmCatInternalOther, w.Severity == dcgmSevConfig:
		return false
	}
	// No usable classification: the failure stands as DCGM reported it.
	return true
}

// judgeDCGMDiag judges every result of the DCGM diagnostic by its status:
// Pass is fine; Skip and Warn are warnings; Fail is FAIL when it is a
// hardware failure and INCONCLUSIVE when it is a software or configuration
// failure (dcgmFailureIsHardware); an unknown status, a runtime error or a
// document without results is INCONCLUSIVE. Results of one test with the
// same outcome and the same DCGM error ids are reported once, naming every
// GPU they cover.
func judgeDCGMDiag(out Output, _ Options) findings {
	var f findings
	rep, err := parseDCGMDiag(out.Stdout)
	if err != nil {
		f.inconclusivef("%v%s", err, quoteFirstLine(out.Stdout))
		return f
	}
	if rep.RuntimeError != "" {
		f.inconclusivef("dcgmi diag could not run: %s", rep.RuntimeError)
	}
	if len(rep.Results) == 0 && rep.RuntimeError == "" {
		f.inconclusivef("dcgmi diag reported no test results")
	}
	type key struct{ category, test, outcome, errors string }
	type group struct {
		first    dcgmResult
		entities []string
	}
	groups := map[key]*group{}
	var order []key
	for _, r := range rep.Results {
		outcome := dcgmStatus(r.Status)
		switch {
		case outcome == "pass":
			continue
		case outcome == "fail" && dcgmFailureIsHardware(r):
			outcome = "fail-hardware"
		case outcome == "":
			outcome = "unknown " + r.Status
		}
		k := key{category: r.Category, test: r.Test, outcome: outcome, errors: r.errorIDs()}
		g, ok := groups[k]
		if !ok {
			g = &group{first: r}
			groups[k] = g
			order = append(order, k)
		}
		g.entities = append(g.entities, r.entity())
	}
	for _, k := range order {
		g := groups[k]
		what := fmt.Sprintf("test %q (%s) on %s", k.test, k.category, joinEntities(g.entities))
		detail := g.first.detail()
		switch k.outcome {
		case "skip":
			f.warnf("%s: skipped%s", what, detail)
		case "warn":
			f.warnf("%s: warning%s", what, detail)
		case "fail-hardware":
			f.failf("%s: failed%s", what, detail)
		case "fail":
			f.inconclusivef("%s: failed for a software or configuration reason%s", what, detail)
		default:
			f.inconclusivef("%s: unknown status %q%s", what, g.first.Status, detail)
		}
	}
	return f
}

// errorIDs lists the DCGM error ids of a result's warnings, or its warning
// texts when it has no ids, as a grouping key.
func (r dcgmResult) errorIDs() string {
	var ids []string
	for _, w := range r.Warnings {
		if w.ErrorID != 0 {
			ids = append(ids, strconv.Itoa(w.ErrorID))
		} else {
			ids = append(ids, w.Text)
		}
	}
	return strings.Join(ids, "\x00")
}

// joinEntities names several results' GPUs: "GPU 3", "GPUs 0,1,7", or the
// entity names joined with ", ".
func joinEntities(entities []string) string {
	if len(entities) == 1 {
		return entities[0]
	}
	ids := make([]string, 0, len(entities))
	for _, e := range entities {
		id, ok := strings.CutPrefix(e, "GPU ")
		if !ok || strings.Contains(id, ",") {
			return strings.Join(entities, ", ")
		}
		ids = append(ids, id)
	}
	return "GPUs " + strings.Join(ids, ",")
}

// detail renders a result's warnings (or, without any, its info) as
// ": text; text", with DCGM error ids.
func (r dcgmResult) detail() string {
	var parts []string
	for _, w := range r.Warnings {
		s := w.Text
		if w.ErrorID != 0 {
			s += " [DCGM error " + strconv.Itoa(w.ErrorID) + "]"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		parts = r.Info
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + text.Truncate(strings.Join(parts, "; "), 400)
}
