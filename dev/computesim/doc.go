// Package computesim is flexslurm's Compute Engine simulator: an in-memory
// http.Handler that serves the subset of the Compute Engine v1 REST API that
// flexslurm calls, with the real wire format, so that the unmodified
// cloud.google.com/go/compute/apiv1 REST clients can be pointed at it with
// option.WithEndpoint(url) and option.WithoutAuthentication().
//
// It owns:
//
//   - global instance templates: insert, get, delete, list; a boot disk needs
//     an existing source image or image family, and GPU settings are checked
//     (images.go, gpus.go);
//   - global images: get, getFromFamily, seeded with debian-cloud's
//     debian-12 and the default slurm-gcp GPU family (AddImage adds more),
//     readable from any project;
//   - zonal managed instance groups (MIGs): insert, get, delete, list,
//     listManagedInstances, deleteInstances, resize, setInstanceTemplate;
//   - zonal MIG resize requests: insert, get, list, cancel, delete, with the
//     Flex-Start state machine CREATING → ACCEPTED → SUCCEEDED (or CANCELLED,
//     FAILED), under /compute/beta/ as well as /compute/v1/, with their zone
//     operations;
//   - regional MIGs and their resize requests (regional.go): insert, get,
//     list, delete, listManagedInstances, deleteInstances, and the resize
//     request methods, at /compute/v1/projects/P/regions/R/…, with region
//     operations; distributionPolicy checked, an ANY_SINGLE_ZONE request
//     provisioned in one zone that no Shortage covers;
//   - both readings of each open point of Compute behaviour, chosen with
//     Options.Readings (readings.go; docs/compute-contract.md, "Open
//     points");
//   - zonal instances: insert (outside any MIG, RUNNING at once, checked
//     like a template), get, list (filter, orderBy, paging), delete,
//     reportHostAsFaulty;
//   - aggregated lists of instances and MIGs across zones (filter, paging);
//   - regional workload policies (resource policies with workloadPolicy):
//     insert, get, delete, aggregatedList, and the MIGs that reference one
//     (policies.go; docs/design/placement.md);
//   - zone, region and global operations: get and wait;
//   - zones.get, which the gcloud CLI calls before zonal commands;
//   - regions.get and projects.get with their quotas[] (quotas.go): limits
//     from Options.Quotas, usage from what the simulator holds; a limit set
//     is enforced (MIG and template inserts refused, resize requests
//     queued short of GPU quota), and every quota error carries quotaInfo;
//   - the Cloud Audit Logs entries that a Logging sink → Pub/Sub would deliver
//     when a VM is deleted (at the end of its run duration or by an API call),
//     handed to an injected sink;
//   - an error-injection seam and introspection for tests and demos;
//   - shortages of capacity or quota as Compute reports them (shortage.go):
//     resize requests stay ACCEPTED with each provisioning attempt's error
//     in status.lastAttempt.error, cleared when they turn final;
//   - each VM's metadata server on a listener of its own (metadata.go), and
//     a minimal Secret Manager versions:access endpoint
//     (secretmanager.go), so that a node's bootstrap runs unmodified.
//
// # Wire format
//
// Requests and responses are proto-JSON encodings of the computepb messages,
// exactly what the REST clients send and parse: camelCase field names, 64-bit
// integers as strings in responses (both strings and numbers are accepted on
// input), enums as strings. Unknown request fields are rejected with 400, as
// the real API does. Errors use the Compute error body
//
//	{"error":{"code":400,"message":"…","errors":[{"message":"…","domain":"global","reason":"invalid"}]}}
//
// Every mutation returns an Operation whose status is RUNNING in the immediate
// response and DONE on the first poll (GET …/operations/{name} or POST
// …/operations/{name}/wait), so (*compute.Operation).Wait returns within
// milliseconds.
//
// # Contract
//
// Every request is checked, before any handler runs, against the Compute v1
// discovery document of the google.golang.org/api module that go.mod
// requires. go generate extracts the served methods and the schemas they
// reach into contract.json (internal/contractgen); TestContractUpToDate
// fails when it is stale. Path parameters must match their documented
// patterns; query parameters must be the method's or the API's common ones,
// with valid values; bodies may hold only documented fields, with the
// documented JSON types, enum values and patterns, and must carry the
// fields the document marks as required by the method. Documented rules the
// schemas cannot express (list filter grammar, resize-request limits and
// states) are in rules.go, each with its source. A routed method without a
// contract is refused with 500: adding one means listing it in
// internal/contract.Served and running go generate. docs/compute-contract.md
// describes the checker and how the gcloud CLI, run against the simulator as
// an outside client, differs from flexslurm's client.
//
// # Time
//
// The simulator never reads the wall clock. Every transition (a resize request
// being accepted or provisioned, a VM reaching its termination time, a VM
// finishing deletion or repair) is due at a computed instant and is applied by
// Tick(now), in (due time, creation order) order, with the due time as its
// timestamp. Every API request first applies what is due at clock.Now(), so a
// reader always sees the state of the world as of the clock. Server.Run ticks
// periodically for live use with a clock.Scaled; scenario runs with a
// clock.Manual call Tick themselves, using NextDue to jump to the next
// transition.
//
// # Fidelity notes
//
// Where the real API's behaviour is undocumented the simulator picks one
// plausible behaviour and documents it at the point of use. The main ones:
//
//   - A resize request with named instances stays ACCEPTED while any VM with
//     one of those names still exists in the zone (for example one still being
//     deleted after its run duration ended); it is provisioned once the name is
//     free and its capacity delay has passed. A real MIG does not create an
//     instance over an existing name either.
//   - Queued (ACCEPTED) resize-request VMs are not listed as managed instances.
//   - A request short of capacity or quota is attempted at its capacity
//     delay, then every Options.AttemptInterval (default 5 minutes) and when
//     the shortage ends; Compute does not document its retry cadence.
//   - Deleting a MIG member with instances.delete shrinks the MIG's target size
//     instead of letting the MIG recreate it.
//   - The metadata key created-by holds
//     projects/PROJECT_NUMBER/zones/ZONE/instanceGroupManagers/NAME, the form
//     Compute Engine writes on MIG-created VMs.
//
// # Command line
//
// ListenAndServe is the entry point for a CLI command such as
//
//	flexslurm compute-sim --addr 127.0.0.1:8787 --speedup 600
//
// which should expose these flags: --addr (listen address), --speedup (the
// clock.Scaled factor), --origin (virtual start time, RFC 3339), --project,
// --project-number, --seed, --capacity-delay (time from ACCEPTED to
// SUCCEEDED), --delete-delay (time a VM spends STOPPING while being deleted),
// --repair-delay (time a VM spends REPAIRING after reportHostAsFaulty),
// --expiry-log-style (deferredDelete or migDelete), --caller-principal, and a
// destination for audit entries (for example a Pub/Sub topic on the emulator,
// wired through Options.AuditSink).
//
// This package imports nothing from flexslurm except shared/clock.
package computesim
