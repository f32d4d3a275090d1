package main

import (
	"cmp"
	"context"
	"errors"
	"flag"

	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/internal/provision"
	"github.com/orderjob/executor/xxljob"
)

func init() {
	register(command{
		name:    "provision",
		usage:   "[-jobs FILE] [-dry-run] [-prune]",
		summary: "create or update the executor group and its jobs in the admin from the jobs file",
		run:     cmdProvision,
	})
	register(command{
		name:    "trigger",
		usage:   "HANDLER [-key KEY] [-param P] [-wait] [-jobs FILE]",
		summary: "ask the admin to run a declared job once; -wait follows its log and exits 0 on success, 1 on failure",
		run:     cmdTrigger,
	})
}

func cmdProvision(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "provision")
	jobsPath := fs.String("jobs", "", "jobs file (default: xxl.job.admin.jobsFile, config/jobs.yml)")
	dryRun := fs.Bool("dry-run", false, "print the plan and change nothing")
	prune := fs.Bool("prune", false, "stop (never delete) marked jobs the file no longer declares")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return provisionFlagErr(err)
	}
	if len(pos) != 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	client, jobs, err := provisionSetup(env, *jobsPath)
	if err != nil {
		return err
	}
	defer client.Close()
	_, err = provision.Apply(ctx, client, jobs, provision.ApplyOptions{DryRun: *dryRun, Prune: *prune, Out: env.stdout})
	return err
}

func cmdTrigger(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "trigger")
	jobsPath := fs.String("jobs", "", "jobs file (default: xxl.job.admin.jobsFile, config/jobs.yml)")
	key := fs.String("key", "", "the job's key, when several declared jobs share the handler")
	param := fs.String("param", "", "job param for this run (default: the job's own param)")
	wait := fs.Bool("wait", false, "follow the run's log and exit with its result: 0 success, 1 failure")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return provisionFlagErr(err)
	}
	if len(pos) != 1 {
		return usagef("want exactly one HANDLER, got %d", len(pos))
	}
	opts := provision.TriggerOptions{Handler: pos[0], Key: *key, Wait: *wait, Out: env.stdout}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "param" { // -param "" means an empty param, not the job's own
			opts.Param = param
		}
	})
	client, jobs, err := provisionSetup(env, *jobsPath)
	if err != nil {
		return err
	}
	defer client.Close()
	res, err := provision.Trigger(ctx, client, jobs, opts)
	if err != nil {
		return err
	}
	if *wait && !res.Success {
		return exitError{code: 1} // the run's failure is already printed
	}
	return nil
}

// provisionSetup loads the config and the jobs file and makes the console
// client, logging to stderr (stdout carries the plan or the run log).
func provisionSetup(env *cliEnv, jobsPath string) (*provision.Client, *provision.JobsFile, error) {
	cfg, err := loadConfig(env)
	if err != nil {
		return nil, nil, err
	}
	admin := cfg.XXL.Job.Admin
	jobs, err := provision.LoadJobsFile(cmp.Or(jobsPath, admin.JobsFile), cfg.XXL.Job.Executor.AppName)
	if err != nil {
		return nil, nil, err
	}
	// The executor's own TLS settings: the console is the same admin.
	tlsCfg, err := xxljob.AdminTLSConfig(app.ExecutorConfig(cfg, nil))
	if err != nil {
		return nil, nil, err
	}
	client, err := provision.NewClient(provision.ClientConfig{
		Addresses:  admin.Addresses,
		Username:   admin.Username,
		Password:   admin.Password,
		Version:    admin.Version,
		GroupToken: cfg.XXL.Job.AccessToken,
		Timeout:    admin.Timeout,
		TLS:        tlsCfg,
		Logger:     app.NewLogger(cfg, env.stderr).With("component", "provision"),
	})
	if err != nil {
		return nil, nil, err
	}
	return client, jobs, nil
}

// provisionFlagErr turns a flag parse error into bad usage (exit 2); -h stays help.
func provisionFlagErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usagef("%v", err)
}
