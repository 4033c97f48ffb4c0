"""Backends beyond the core, as in Luigi's ``luigi.contrib``: each module brings its client library as an
optional extra (``pip install 'luigi[s3]'``), imported only when the module is used."""
