/* cli/version.h - the version and commit sluice and sluice-inner print
 * (CMake defines both; these are the defaults of a build without git). */
#ifndef SLUICE_CLI_VERSION_H
#define SLUICE_CLI_VERSION_H

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "0.1.0"
#endif
#ifndef SLUICE_COMMIT
#define SLUICE_COMMIT "unknown"
#endif

#endif
