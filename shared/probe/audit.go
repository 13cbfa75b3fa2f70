package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	logging "google.golang.org/api/logging/v2"
	"google.golang.org/api/option"
)

// AuditEntry is the part of a Cloud Audit Logs LogEntry the probe reads.
type AuditEntry struct {
	// LogName is projects/P/logs/cloudaudit.googleapis.com%2Factivity or
	// …%2Fsystem_event.
	LogName string
	// Method is protoPayload.methodName: "compute.instances.deferredDelete",
	// "v1.compute.instances.delete", …
	Method string
	// Principal is protoPayload.authenticationInfo.principalEmail.
	Principal string
	// Resource is protoPayload.resourceName:
	// projects/P/zones/Z/instances/NAME.
	Resource string
	// Time is the entry's timestamp.
	Time time.Time
}

// ParseAuditEntry reads a LogEntry's JSON (as Cloud Logging's
// entries.list returns it, and as a Logging sink publishes it to Pub/Sub:
// https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry).
func ParseAuditEntry(data []byte) (AuditEntry, error) {
	var e struct {
		LogName      string `json:"logName"`
		Timestamp    string `json:"timestamp"`
		ProtoPayload struct {
			MethodName         string `json:"methodName"`
			ResourceName       string `json:"resourceName"`
			AuthenticationInfo struct {
				PrincipalEmail string `json:"principalEmail"`
			} `json:"authenticationInfo"`
		} `json:"protoPayload"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return AuditEntry{}, fmt.Errorf("reading an audit log entry: %w", err)
	}
	return AuditEntry{
		LogName:   e.LogName,
		Method:    e.ProtoPayload.MethodName,
		Principal: e.ProtoPayload.AuthenticationInfo.PrincipalEmail,
		Resource:  e.ProtoPayload.ResourceName,
		Time:      parseTime(e.Timestamp),
	}, nil
}

// AuditReader returns the audit entries about one VM since a time.
type AuditReader interface {
	// InstanceEntries returns the Compute Engine audit entries (Admin
	// Activity and System Event) whose protoPayload.resourceName is
	// projects/PROJECT/zones/ZONE/instances/NAME, timestamped at or after
	// since.
	InstanceEntries(ctx context.Context, zone, name string, since time.Time) ([]AuditEntry, error)
}

// AuditFilter is the Cloud Logging filter the probe lists one VM's audit
// entries with (https://cloud.google.com/logging/docs/view/logging-query-language).
// The method is matched with ":" (substring), so both the versioned
// Admin Activity names (v1.compute.instances.delete, beta.…) and the
// System Event name compute.instances.deferredDelete match.
func AuditFilter(project, zone, name string, since time.Time) string {
	return fmt.Sprintf(`logName=("projects/%[1]s/logs/cloudaudit.googleapis.com%%2Factivity" OR "projects/%[1]s/logs/cloudaudit.googleapis.com%%2Fsystem_event") `+
		`AND protoPayload.resourceName="projects/%[1]s/zones/%[2]s/instances/%[3]s" `+
		`AND protoPayload.methodName:"compute.instances." `+
		`AND timestamp>=%q`, project, zone, name, since.UTC().Format(time.RFC3339))
}

// LoggingReader reads audit entries from Cloud Logging (entries.list,
// https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list)
// through the google.golang.org/api/logging/v2 client. The caller needs
// roles/logging.viewer on the project.
type LoggingReader struct {
	project string
	svc     *logging.Service
}

// NewLoggingReader creates a reader for project.
func NewLoggingReader(ctx context.Context, project string, opts ...option.ClientOption) (*LoggingReader, error) {
	svc, err := logging.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating the Cloud Logging client: %w", err)
	}
	return &LoggingReader{project: project, svc: svc}, nil
}

// InstanceEntries implements AuditReader.
func (r *LoggingReader) InstanceEntries(ctx context.Context, zone, name string, since time.Time) ([]AuditEntry, error) {
	req := &logging.ListLogEntriesRequest{
		ResourceNames: []string{"projects/" + r.project},
		Filter:        AuditFilter(r.project, zone, name, since),
		OrderBy:       "timestamp asc",
		PageSize:      100,
	}
	var out []AuditEntry
	err := r.svc.Entries.List(req).Pages(ctx, func(resp *logging.ListLogEntriesResponse) error {
		for _, e := range resp.Entries {
			data, err := e.MarshalJSON()
			if err != nil {
				return err
			}
			a, err := ParseAuditEntry(data)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing audit log entries of instance %s: %w", name, err)
	}
	return out, nil
}

// EntriesReader is an AuditReader over LogEntry JSON held in memory (a
// simulator's audit entries): Entries returns every entry so far.
type EntriesReader struct {
	Project string
	Entries func() [][]byte
}

// InstanceEntries implements AuditReader with the same selection as
// AuditFilter.
func (r EntriesReader) InstanceEntries(_ context.Context, zone, name string, since time.Time) ([]AuditEntry, error) {
	resource := "projects/" + r.Project + "/zones/" + zone + "/instances/" + name
	var out []AuditEntry
	for _, data := range r.Entries() {
		e, err := ParseAuditEntry(data)
		if err != nil {
			return nil, err
		}
		if e.Resource == resource && strings.Contains(e.Method, "compute.instances.") && !e.Time.Before(since) {
			out = append(out, e)
		}
	}
	return out, nil
}
