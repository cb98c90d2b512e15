module ptah.invalid/controlplane/etcd

go 1.26.0
