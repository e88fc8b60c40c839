/* socks/session.c - placeholder, being written */
typedef int sluice_placeholder_t;
