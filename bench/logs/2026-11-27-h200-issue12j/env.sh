# sourced by each cN.sh: extract the bundle (once per machine), set the library path
set -u
[ -x /tmp/baton-bundle/bin/baton ] && cmp -s .bundle/baton-bundle.tgz /tmp/bundle.tgz || { cp .bundle/baton-bundle.tgz /tmp/bundle.tgz; rm -rf /tmp/baton-bundle; tar -xzf /tmp/bundle.tgz -C /tmp; }
B=/tmp/baton-bundle
SITE=$(python3 -c 'import site; print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH="$B/lib:$(ls -d $SITE/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64"
export PYTHONUNBUFFERED=1
C=$(awk '/^commit/{print $2}' $B/BUILD_INFO)
