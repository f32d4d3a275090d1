// Package provision keeps the admin console's executor group and jobs in
// step with a declarative jobs file ("jobs as code"), and runs a declared
// job once on demand. It backs `executor provision` and `executor trigger`.
//
// # Talking to the admin
//
// XXL-JOB has no released API for managing jobs, so the client logs into the
// browser-facing console endpoints as a console user (an admin: group
// endpoints require the role) and posts forms, as the console's pages do.
// Two generations are supported (api.go holds the table): 2.4.x, the primary
// target (also 2.3, 2.5, 3.0 and 3.1), and 3.3-3.4, which moved the login,
// renamed create/delete, wrapped list replies in the envelope and switched
// `content` to `data`. "auto" posts the login form to /auth/doLogin first: a
// JSON answer means 3.2+, a 404 or redirect means 2.x.
//
// The password and the session cookie never reach a log, an error or the
// output: errors built from answers are scrubbed, and a login answer's body
// is never echoed (the 2.x cookie embeds the password's MD5). Redirects are
// not followed: a 302 to the login page is how 2.x says "not logged in"; 3.2+
// says it with a failure envelope reading "not login". Either way the call
// did nothing, so the client logs in again and repeats it, once per run.
//
// # Finding what exists
//
// Nothing in the admin is unique but ids. The group is found by exact
// appname (the list filter is a LIKE); each job by group, handler and a
// marker "[prov:KEY]" that provisioning keeps at the end of the job
// description (the whole text within the console's 50 characters). Jobs
// with a declared handler but no marker belong to people: they are reported
// and left alone.
//
// # Applying
//
//	read group + jobs -> plan (create / update with field diff / unchanged,
//	start / stop, strays) -> admin checks each new schedule -> print plan
//	-> [dry run stops here] -> group -> jobs, children first -> strays
//	-> read back and compare (verify)
//
// Every save sends the complete form, since /jobinfo/update overwrites every
// field and turns an omitted one into null or 0. A new job is saved without
// triggerStatus and started by its own call: saved as running, a misfire
// strategy could fire it at once. A job to be stopped is stopped before its
// save. -prune stops (never removes: that would delete its run logs) marked
// jobs no longer declared. A second run with nothing changed makes no write.
//
// # Triggering
//
// Trigger finds the declared job, notes the newest log id of the job, asks
// for one manual run with an explicit param (an omitted one means an empty
// param), then finds the run's log rows above that id (one per executor for
// a broadcast run), prints their logs through /joblog/logDetailCat and
// reports each row's result.
package provision
