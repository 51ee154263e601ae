//go:build tools

// Package tools names the programs of the local cluster this module pins: Kubernetes' control plane, node
// components and kubeadm (which writes the certificates and kubeconfigs), and etcd at the version Kubernetes
// itself requires. build.sh builds them with `go build`; `go mod tidy` keeps go.sum complete for them.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
