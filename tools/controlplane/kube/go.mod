module ptah.invalid/controlplane/kube

go 1.26.0
