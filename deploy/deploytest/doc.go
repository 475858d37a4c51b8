// Package deploytest validates the deployment files statically: the root
// docker-compose.yml, the helm/codectx chart (rendered here with
// text/template and a small implementation of the helm functions it uses)
// and deploy/Dockerfile. It has no code of its own beyond tests; CI runs
// them without Docker, Kubernetes, helm or network.
package deploytest
