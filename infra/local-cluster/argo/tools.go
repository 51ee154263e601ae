//go:build tools

// Package tools names the Argo Workflows programs the local cluster runs: the controller, the executor and
// the CLI (which is also the Argo Server). A module of their own, so that Argo builds with the dependency
// versions its release was tested with, not Kubernetes'.
package tools

import (
	_ "github.com/argoproj/argo-workflows/v4/cmd/argo"
	_ "github.com/argoproj/argo-workflows/v4/cmd/argoexec"
	_ "github.com/argoproj/argo-workflows/v4/cmd/workflow-controller"
)
