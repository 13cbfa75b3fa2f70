// Package lang is the scenario language: the YAML format of a scenario
// file (File and the step, fault and check types), its loading and
// validation, durations and times (7d, +15m, never), the Slurm state
// notation (IDLE+CLOUD+POWERED_DOWN) and crash points (after#1,
// before:create_resize_request). docs/scenarios.md is its reference.
//
// Decoding is strict: an unknown key, a bad value or an inconsistent step
// is an error that names the key path and the line. Marshal writes a File
// that Parse reads back, so generated scenarios (dev/chaos) can be saved
// and replayed.
package lang
