package main

import (
	"cmp"
	"context"
	"flag"

	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/internal/provision"
	"github.com/orderjob/executor/xxljob"
)

func provisionCommand() *command {
	return &command{name: "provision", flags: provisionFlags,
		summary: "create or update the executor group and its jobs in the admin from the jobs file"}
}

func triggerCommand() *command {
	return &command{name: "trigger", args: "HANDLER", flags: triggerFlags, errPrefix: "provision",
		summary: "ask the admin to run a declared job once; -wait follows its log and exits 0 on success, 1 on failure"}
}

func provisionFlags(fs *flag.FlagSet, env *cliEnv) runFunc {
	jobsPath := fs.String("jobs", "", "jobs file (default: xxl.job.admin.jobsFile, config/jobs.yml)")
	dryRun := fs.Bool("dry-run", false, "print the plan and change nothing")
	prune := fs.Bool("prune", false, "stop (never delete) marked jobs the file no longer declares")
	return func(ctx context.Context, _ []string) error {
		client, jobs, err := provisionSetup(ctx, env, *jobsPath)
		if err != nil {
			return err
		}
		defer client.Close()
		_, err = provision.Apply(ctx, client, jobs, provision.ApplyOptions{DryRun: *dryRun, Prune: *prune, Out: env.stdout})
		return err
	}
}

func triggerFlags(fs *flag.FlagSet, env *cliEnv) runFunc {
	jobsPath := fs.String("jobs", "", "jobs file (default: xxl.job.admin.jobsFile, config/jobs.yml)")
	key := fs.String("key", "", "the job's key, when several declared jobs share the handler")
	param := fs.String("param", "", "job param for this run (default: the job's own param)")
	wait := fs.Bool("wait", false, "follow the run's log and exit with its result: 0 success, 1 failure")
	return func(ctx context.Context, pos []string) error {
		// A name the binary lacks is a typo, whatever the jobs file says;
		// one it has but the file lacks is the file's to fix (exit 1).
		if err := checkHandler(pos[0]); err != nil {
			return err
		}
		opts := provision.TriggerOptions{Handler: pos[0], Key: *key, Wait: *wait, Out: env.stdout}
		if len(setFlags(fs, "param")) > 0 { // -param "" means an empty param, not the job's own
			opts.Param = param
		}
		client, jobs, err := provisionSetup(ctx, env, *jobsPath)
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
}

// provisionSetup loads the config and the jobs file and makes the console
// client, logging to stderr (stdout carries the plan or the run log).
func provisionSetup(ctx context.Context, env *cliEnv, jobsPath string) (*provision.Client, *provision.JobsFile, error) {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	admin := cfg.XXL.Job.Admin
	jobsPath = cmp.Or(jobsPath, admin.JobsFile)
	data, err := readInputFile(ctx, "jobs file", jobsPath)
	if err != nil {
		return nil, nil, err
	}
	jobs, err := provision.ParseJobsFile(jobsPath, data, cfg.XXL.Job.Executor.AppName)
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
