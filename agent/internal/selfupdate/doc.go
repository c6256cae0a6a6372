// Package selfupdate updates the agent itself (server/RATIONALE.md,
// "Agent updates"). A rollout stages a signed release over the device's
// own link (stage_release), starts it on trial (apply_release), and
// commits or rejects it (end_trial). The Supervisor, which the flashed
// binary becomes when release keys are configured, starts the newest
// committed release, or the flashed binary itself, as a child; it starts
// a release on trial and brings the previous agent back when the trial
// fails: the release exits, cannot be executed at all, hangs, or is not
// committed within its bound. The flashed binary is never changed.
//
// Everything lives in DATA/releases: state.json (which releases are
// committed, which is on trial, the last trial that failed), bin/SHA256
// (installed releases, checked before every start) and incoming/SHA256
// (a download's compressed stream so far).
package selfupdate
