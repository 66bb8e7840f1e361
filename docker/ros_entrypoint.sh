#!/bin/bash
# The containers' entrypoint: sources ROS 2 (the apt layout, /opt/ros/$ROS_DISTRO/setup.bash, or jetson-containers'
# source build, /opt/ros/$ROS_DISTRO/install/setup.bash) and the workspace, then runs the command (the venv is on
# PATH already: docker/Dockerfile*, ENV PATH).
for setup in "/opt/ros/$ROS_DISTRO/install/setup.bash" "/opt/ros/$ROS_DISTRO/setup.bash"; do
  if [ -f "$setup" ]; then
    source "$setup"
    break
  fi
done
source /ws/install/setup.bash
exec "$@"
