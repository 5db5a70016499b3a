# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
